import { readFileSync } from 'node:fs';

/**
 * Secrets as files (the Docker/Kubernetes convention): every secret variable `NAME` may instead be given
 * as `NAME_FILE`, the path of a file holding the value, so the value need not sit in the bot's
 * environment (which a process of the same user can read through `/proc/<pid>/environ`).
 */
const SECRET_VARIABLES = [
  'SHEPHERD_LLM_API_KEY',
  'SLACK_BOT_TOKEN',
  'SLACK_APP_TOKEN',
  'SLACK_SIGNING_SECRET',
  'DISCORD_TOKEN',
  'SHEPHERD_HUB_TOKEN',
  'SHEPHERD_GITHUB_TOKEN',
  'SHEPHERD_PLAYGROUND_TOKEN',
  'SHEPHERD_METRICS_TOKEN',
  'SHEPHERD_ADMIN_TOKEN',
  'REDIS_URL',
  'REDIS_SENTINEL_PASSWORD',
] as const;

const RUN_ENV_PREFIX = 'SHEPHERD_RUN_ENV_';

/**
 * Returns the environment with each `NAME_FILE` read into `NAME`, and one message per problem
 * (both forms set, an unreadable or empty file).
 */
export function resolveSecretFiles(environment: Record<string, string | undefined>): {
  environment: Record<string, string | undefined>;
  problems: string[];
} {
  const resolved: Record<string, string | undefined> = { ...environment };
  const problems: string[] = [];
  for (const name of SECRET_VARIABLES) {
    const path = environment[`${name}_FILE`]?.trim();
    if (path === undefined || path === '') continue;
    if ((environment[name] ?? '').trim() !== '') {
      problems.push(`  ${name}_FILE: set ${name} or ${name}_FILE, not both`);
      continue;
    }
    let value: string;
    try {
      value = readFileSync(path, 'utf8').replace(/\r?\n$/, '');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      problems.push(`  ${name}_FILE=${JSON.stringify(path)}: cannot read the file (${code})`);
      continue;
    }
    if (value.trim() === '') {
      problems.push(`  ${name}_FILE=${JSON.stringify(path)}: the file is empty`);
      continue;
    }
    resolved[name] = value;
  }
  return { environment: resolved, problems };
}

/** The literal secret values to redact from everything that leaves: the bot's own and the runs'. */
export function secretValuesOf(environment: Record<string, string | undefined>): string[] {
  const values: string[] = [];
  for (const name of SECRET_VARIABLES) {
    const value = environment[name]?.trim();
    if (value === undefined || value === '') continue;
    if (name === 'REDIS_URL') {
      // Only the password of a Redis URL is secret.
      try {
        const password = decodeURIComponent(new URL(value).password);
        if (password !== '') values.push(password);
      } catch {
        // An invalid URL is reported by the schema.
      }
      continue;
    }
    values.push(value);
  }
  for (const [name, value] of Object.entries(environment)) {
    if (name.startsWith(RUN_ENV_PREFIX) && value !== undefined && value.trim() !== '') values.push(value);
  }
  return values;
}
