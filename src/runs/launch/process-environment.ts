/**
 * The environment a training process inherits: the bot's own, minus its settings and secrets. Training
 * scripts are user code; they must never see chat tokens, LLM keys or the Redis URL. A secret a script
 * does need (a Hugging Face token, say) is passed explicitly as `SHEPHERD_RUN_ENV_<NAME>`.
 */
const DROPPED_PREFIXES = ['SHEPHERD_', 'SLACK_', 'DISCORD_', 'REDIS_', 'npm_'];
const SECRET_WORDS = /(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIAL|COOKIE)/i;
/** Named like a key: a name part ending in KEY or KEYS (`MY_SERVICE_KEY`, `AWS_ACCESS_KEY_ID`, `SSHKEY`). */
const KEY_NAME = /(?:^|_)[A-Z0-9]*KEYS?(?:_|$)/i;
const PASS_THROUGH = 'SHEPHERD_RUN_ENV_';

export function scrubRunEnvironment(
  environment: Readonly<Record<string, string | undefined>>,
): Record<string, string | undefined> {
  const kept: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(environment)) {
    if (
      DROPPED_PREFIXES.some((prefix) => name.startsWith(prefix)) ||
      SECRET_WORDS.test(name) ||
      KEY_NAME.test(name)
    )
      continue;
    kept[name] = value;
  }
  for (const [name, value] of Object.entries(environment)) {
    if (name.startsWith(PASS_THROUGH) && name.length > PASS_THROUGH.length)
      kept[name.slice(PASS_THROUGH.length)] = value;
  }
  return kept;
}

/** Only the `SHEPHERD_RUN_ENV_<NAME>` values, as `<NAME>`: what a remote job gets (as the backend's secrets). */
export function runEnvironmentSecrets(
  environment: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const secrets: Record<string, string> = {};
  for (const [name, value] of Object.entries(environment)) {
    if (name.startsWith(PASS_THROUGH) && name.length > PASS_THROUGH.length && value !== undefined)
      secrets[name.slice(PASS_THROUGH.length)] = value;
  }
  return secrets;
}
