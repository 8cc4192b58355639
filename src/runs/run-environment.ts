/**
 * The environment a training process inherits: the bot's own, minus its settings and secrets. Training
 * scripts are user code; they must never see chat tokens, LLM keys or the Redis URL. A secret a script
 * does need (a Hugging Face token, say) is passed explicitly as `SHEPHERD_RUN_ENV_<NAME>`.
 */
const DROPPED_PREFIXES = ['SHEPHERD_', 'SLACK_', 'DISCORD_', 'REDIS_', 'npm_'];
const SECRET_WORDS = /(TOKEN|SECRET|PASSWORD|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIAL)/i;
const PASS_THROUGH = 'SHEPHERD_RUN_ENV_';

export function scrubRunEnvironment(
  environment: Readonly<Record<string, string | undefined>>,
): Record<string, string | undefined> {
  const kept: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(environment)) {
    if (DROPPED_PREFIXES.some((prefix) => name.startsWith(prefix)) || SECRET_WORDS.test(name)) continue;
    kept[name] = value;
  }
  for (const [name, value] of Object.entries(environment)) {
    if (name.startsWith(PASS_THROUGH) && name.length > PASS_THROUGH.length)
      kept[name.slice(PASS_THROUGH.length)] = value;
  }
  return kept;
}
