import { existsSync, readFileSync } from 'node:fs';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { backendEnvironment, backendSettings, configuredBackends } from './backends.js';
import { parseEnvironments } from './environments.js';
import { llmBudgetEnvironment, llmBudgetSettings } from './llm-budget.js';
import { monitorEnvironment } from './monitor.js';
import { redisAuthEnvironment, redisAuthProblem, redisAuthSettings } from './redis-auth.js';
import { researchEnvironment, researchSettings } from './research.js';
import { resolveSecretFiles, secretValuesOf } from './secrets.js';
import { checkApproverList, requirePlaygroundToken } from './security.js';

/*
 * Config is parsed exactly once, at start-up, from the environment (plus an optional `.env`).
 * Nothing else in the code base reads `process.env`; everything receives the frozen `Config`.
 */

const booleanString = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((value) => value === 'true' || value === '1' || value === 'yes');

const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()));

const commaList = z
  .string()
  .default('')
  .transform((value) =>
    value
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item.length > 0),
  );

const positiveNumber = z.coerce.number().positive();
const nonNegativeNumber = z.coerce.number().nonnegative();
const positiveInt = z.coerce.number().int().positive();

/** `SHEPHERD_GPUS`: a count ("4") or a list of indices ("0,2,3"). */
const gpuList = z
  .string()
  .optional()
  .transform((value, context) => {
    if (value === undefined || value.trim() === '') return undefined;
    const trimmed = value.trim();
    if (/^\d+$/.test(trimmed)) return Array.from({ length: Number(trimmed) }, (_, index) => index);
    const parts = trimmed.split(',').map((part) => part.trim());
    if (parts.some((part) => !/^\d+$/.test(part))) {
      context.addIssue({ code: 'custom', message: 'expected a count like "4" or indices like "0,2,3"' });
      return z.NEVER;
    }
    return [...new Set(parts.map(Number))].sort((a, b) => a - b);
  });

const environmentSchema = z.object({
  ...backendEnvironment,
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
  ...redisAuthEnvironment,
  ...researchEnvironment,
  SHEPHERD_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-" only')
    .default('shepherd'),
  SHEPHERD_HOST: z.string().min(1).default('127.0.0.1'),
  SHEPHERD_PLAYGROUND: z.enum(['on', 'off']).default('on'),
  SHEPHERD_PLAYGROUND_TOKEN: optionalString,
  SHEPHERD_ALLOWED_HOSTS: commaList,
  SHEPHERD_PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  SHEPHERD_FILE_TTL_DAYS: z.coerce.number().positive().max(3650).default(30),
  SHEPHERD_DATA_DIR: z.string().min(1).default('./data'),
  SHEPHERD_WORKSPACE: z.string().min(1).default('.'),
  SHEPHERD_ROLE: z.enum(['bot', 'worker', 'all']).default('all'),
  SHEPHERD_LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  SHEPHERD_BOT_NAME: z.string().min(1).default('shepherd'),

  SHEPHERD_LLM_PROVIDER: z.enum(['openai', 'anthropic']).default('openai'),
  SHEPHERD_LLM_BASE_URL: z.string().url().default('http://localhost:11434/v1'),
  SHEPHERD_LLM_MODEL: z.string().min(1).default('qwen3.5'),
  SHEPHERD_LLM_API_KEY: optionalString,
  SHEPHERD_LLM_TIMEOUT_MS: positiveInt.default(60_000),
  SHEPHERD_LLM_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
  SHEPHERD_MAX_TOOL_ROUNDS: positiveInt.default(10),
  SHEPHERD_LLM_MODELS: commaList,
  ...llmBudgetEnvironment,
  SHEPHERD_MAX_FOLLOW_TURNS: z.coerce.number().int().min(0).default(5),
  /** Unset: the `prompts/playbooks/` shipped with Shepherd. */
  SHEPHERD_PLAYBOOKS_DIR: optionalString,

  SHEPHERD_TURN_CONCURRENCY: positiveInt.default(8),
  SHEPHERD_JOB_LOCK_MS: positiveInt.default(30_000),

  SHEPHERD_PYTHON: z.string().min(1).default('python3'),
  SHEPHERD_RUN_AS_USER: optionalString,
  SHEPHERD_GPUS: gpuList,
  SHEPHERD_ENVIRONMENTS: z
    .string()
    .optional()
    .transform((value, context) => {
      try {
        return parseEnvironments(value);
      } catch (error) {
        context.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    }),
  SHEPHERD_DEFAULT_ENV: optionalString,
  SHEPHERD_STOP_GRACE_S: nonNegativeNumber.default(60),
  SHEPHERD_PIN_MAX_GB: nonNegativeNumber.default(20),
  SHEPHERD_AUTO_RETRIES: z.coerce.number().int().nonnegative().max(100).default(2),
  SHEPHERD_DEFAULT_MAX_HOURS: positiveNumber.default(24),
  SHEPHERD_MAX_HOURS: positiveNumber.refine(Number.isFinite, 'must be finite').default(168),
  SHEPHERD_GPU_HOUR_USD: nonNegativeNumber.default(2.5),
  SHEPHERD_APPROVERS: commaList.superRefine(checkApproverList),
  SHEPHERD_SELF_APPROVAL: booleanString.default(true),
  SHEPHERD_APPROVAL_TTL_H: positiveNumber.default(24),
  SHEPHERD_AUTO_APPROVE_USD: nonNegativeNumber.default(0),
  SHEPHERD_BUDGET_USD_MONTH: positiveNumber.optional(),
  SHEPHERD_DIGEST_CHANNEL: optionalString,
  SHEPHERD_DIGEST_AT: z
    .string()
    .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (UTC)')
    .default('09:00'),

  SHEPHERD_SLURM_PARTITION: optionalString,
  SHEPHERD_SLURM_ACCOUNT: optionalString,
  SHEPHERD_SLURM_EXTRA_ARGS: z
    .string()
    .default('')
    .transform((value) => value.split(/\s+/).filter((word) => word.length > 0)),
  SHEPHERD_SLURM_GPU_FLAG: z.enum(['gres', 'gpus']).default('gres'),
  SHEPHERD_SLURM_CONTAINER: z.enum(['apptainer', 'pyxis']).default('apptainer'),

  SHEPHERD_MONITOR_INTERVAL_S: positiveNumber.default(30),
  SHEPHERD_STALL_S: positiveNumber.default(300),
  // 0 turns the file wake-ups off (timer only).
  SHEPHERD_MONITOR_MAX_EVALS_PER_S: z.coerce.number().min(0).default(2),
  SHEPHERD_MAX_AUTOFIX: z.coerce.number().int().min(0).default(3),
  SHEPHERD_QUICKCHART_URL: z.string().min(1).default('local'),
  SHEPHERD_PROGRESS_EVERY_MIN: nonNegativeNumber.default(0),
  SHEPHERD_SPIKE_WINDOW: positiveInt.default(50),
  SHEPHERD_SPIKE_MAD_K: positiveNumber.default(10),
  SHEPHERD_SPIKE_MIN_RATIO: positiveNumber.default(3),
  SHEPHERD_DIVERGENCE_WINDOW: positiveInt.default(30),
  SHEPHERD_DIVERGENCE_MIN_RISE: positiveNumber.default(0.5),
  SHEPHERD_PLATEAU_WINDOW: positiveInt.default(200),
  SHEPHERD_PLATEAU_MIN_IMPROVEMENT: positiveNumber.default(0.01),
  ...monitorEnvironment,
  SHEPHERD_PLATEAU_MAX_ALERTS: z.coerce.number().int().min(0).default(1),
  SHEPHERD_IDLE_GPU_MIN: positiveNumber.default(15),
  SHEPHERD_NVIDIA_SMI: z.string().min(1).default('nvidia-smi'),

  SLACK_BOT_TOKEN: optionalString,
  SLACK_APP_TOKEN: optionalString,
  SLACK_SIGNING_SECRET: optionalString,
  SLACK_API_URL: optionalString,
  SLACK_ALLOW_BOTS: booleanString.default(false),

  DISCORD_TOKEN: optionalString,
  DISCORD_API_URL: optionalString,
  DISCORD_GUILD_IDS: commaList,

  SHEPHERD_HUB_URL: z.string().url().default('https://huggingface.co'),
  SHEPHERD_HUB_TOKEN: optionalString,
  SHEPHERD_DATASETS_SERVER_URL: z.string().url().default('https://datasets-server.huggingface.co'),

  SHEPHERD_PREFLIGHT_STEPS: z.coerce.number().int().min(0).max(1000).default(0),
  SHEPHERD_PREFLIGHT_TIMEOUT_S: positiveNumber.default(120),
  SHEPHERD_GPU_MEMORY_GB: positiveNumber.default(80),

  SHEPHERD_LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  SHEPHERD_METRICS_TOKEN: optionalString,
  SHEPHERD_ADMIN_TOKEN: optionalString,
});

type Environment = z.output<typeof environmentSchema>;

/** The process: Redis, HTTP, storage, role, logging and the web playground. */
function serviceSettings(environment: Environment) {
  return {
    redisUrl: environment.REDIS_URL,
    queuePrefix: environment.SHEPHERD_QUEUE_PREFIX,
    host: environment.SHEPHERD_HOST,
    port: environment.SHEPHERD_PORT,
    /** How long stored playground files (chart PNGs, uploads) are kept, in days. */
    fileTtlDays: environment.SHEPHERD_FILE_TTL_DAYS,
    dataDir: environment.SHEPHERD_DATA_DIR,
    workspace: environment.SHEPHERD_WORKSPACE,
    role: environment.SHEPHERD_ROLE,
    logLevel: environment.SHEPHERD_LOG_LEVEL,
    botName: environment.SHEPHERD_BOT_NAME,
    playground: {
      enabled: environment.SHEPHERD_PLAYGROUND === 'on',
      token: environment.SHEPHERD_PLAYGROUND_TOKEN,
      allowedHosts: environment.SHEPHERD_ALLOWED_HOSTS,
    },
  };
}

/** The agent: the LLM, sessions and the turn queue. */
function agentSettings(environment: Environment) {
  return {
    llm: {
      provider: environment.SHEPHERD_LLM_PROVIDER,
      baseUrl: environment.SHEPHERD_LLM_BASE_URL,
      model: environment.SHEPHERD_LLM_MODEL,
      apiKey: environment.SHEPHERD_LLM_API_KEY,
      timeoutMs: environment.SHEPHERD_LLM_TIMEOUT_MS,
      maxRetries: environment.SHEPHERD_LLM_MAX_RETRIES,
      maxToolRounds: environment.SHEPHERD_MAX_TOOL_ROUNDS,
      /** Models a thread may switch to (`model <name>`); the default model is always allowed. */
      models: [...new Set([environment.SHEPHERD_LLM_MODEL, ...environment.SHEPHERD_LLM_MODELS])],
      ...llmBudgetSettings(environment),
    },
    session: {
      maxFollowTurns: environment.SHEPHERD_MAX_FOLLOW_TURNS,
      playbooksDir: environment.SHEPHERD_PLAYBOOKS_DIR,
    },
    queue: {
      turnConcurrency: environment.SHEPHERD_TURN_CONCURRENCY,
      lockMs: environment.SHEPHERD_JOB_LOCK_MS,
    },
  };
}

/** Runs and what governs them: executors, approvals, the digest, Slurm. */
function runSettings(environment: Environment) {
  return {
    runs: {
      executor: environment.SHEPHERD_EXECUTOR,
      backends: configuredBackends(environment),
      python: environment.SHEPHERD_PYTHON,
      runAsUser: environment.SHEPHERD_RUN_AS_USER,
      gpus: environment.SHEPHERD_GPUS,
      stopGraceS: environment.SHEPHERD_STOP_GRACE_S,
      /** Largest checkpoint (GB, 10^9 bytes) pinned for a fix's resume; 0 pins nothing. */
      pinMaxGb: environment.SHEPHERD_PIN_MAX_GB,
      /** Automatic relaunches per run after infrastructure failures; 0 turns them off. */
      autoRetries: environment.SHEPHERD_AUTO_RETRIES,
      defaultMaxHours: environment.SHEPHERD_DEFAULT_MAX_HOURS,
      maxHours: environment.SHEPHERD_MAX_HOURS,
      gpuHourUsd: environment.SHEPHERD_GPU_HOUR_USD,
      environments: environment.SHEPHERD_ENVIRONMENTS,
      defaultEnvironment: environment.SHEPHERD_DEFAULT_ENV,
    },
    approvals: {
      approvers: environment.SHEPHERD_APPROVERS,
      selfApproval: environment.SHEPHERD_SELF_APPROVAL,
      ttlHours: environment.SHEPHERD_APPROVAL_TTL_H,
      autoApproveUsd: environment.SHEPHERD_AUTO_APPROVE_USD,
      budgetUsdMonth: environment.SHEPHERD_BUDGET_USD_MONTH,
    },
    digest: {
      channel: environment.SHEPHERD_DIGEST_CHANNEL,
      at: environment.SHEPHERD_DIGEST_AT,
    },
    slurm: {
      partition: environment.SHEPHERD_SLURM_PARTITION,
      account: environment.SHEPHERD_SLURM_ACCOUNT,
      extraArgs: environment.SHEPHERD_SLURM_EXTRA_ARGS,
      gpuFlag: environment.SHEPHERD_SLURM_GPU_FLAG,
      container: environment.SHEPHERD_SLURM_CONTAINER,
      gpuHourUsd: environment.SHEPHERD_SLURM_GPU_HOUR_USD ?? environment.SHEPHERD_GPU_HOUR_USD,
    },
  };
}

/** The monitor and its detectors. */
function monitorSettings(environment: Environment) {
  return {
    monitor: {
      intervalS: environment.SHEPHERD_MONITOR_INTERVAL_S,
      stallS: environment.SHEPHERD_STALL_S,
      maxEvalsPerS: environment.SHEPHERD_MONITOR_MAX_EVALS_PER_S,
      maxAutofix: environment.SHEPHERD_MAX_AUTOFIX,
      quickchartUrl: environment.SHEPHERD_QUICKCHART_URL,
      progressEveryMin: environment.SHEPHERD_PROGRESS_EVERY_MIN,
      spikeWindow: environment.SHEPHERD_SPIKE_WINDOW,
      spikeMadK: environment.SHEPHERD_SPIKE_MAD_K,
      spikeMinRatio: environment.SHEPHERD_SPIKE_MIN_RATIO,
      divergenceWindow: environment.SHEPHERD_DIVERGENCE_WINDOW,
      divergenceMinRise: environment.SHEPHERD_DIVERGENCE_MIN_RISE,
      plateauWindow: environment.SHEPHERD_PLATEAU_WINDOW,
      plateauMinImprovement: environment.SHEPHERD_PLATEAU_MIN_IMPROVEMENT,
      /** Regex source with named groups for printed metric lines no built-in format reads. */
      metricPattern: environment.SHEPHERD_METRIC_PATTERN,
      plateauMaxAlerts: environment.SHEPHERD_PLATEAU_MAX_ALERTS,
      trackerLinks: environment.SHEPHERD_TRACKER_LINKS === 'on',
      idleGpuMin: environment.SHEPHERD_IDLE_GPU_MIN,
      nvidiaSmi: environment.SHEPHERD_NVIDIA_SMI,
    },
  };
}

/** Chat platforms, the Hugging Face Hub, pre-flight checks and operations. */
function integrationSettings(environment: Environment) {
  return {
    slack: {
      botToken: environment.SLACK_BOT_TOKEN,
      appToken: environment.SLACK_APP_TOKEN,
      signingSecret: environment.SLACK_SIGNING_SECRET,
      apiUrl: environment.SLACK_API_URL,
      allowBots: environment.SLACK_ALLOW_BOTS,
    },
    discord: {
      token: environment.DISCORD_TOKEN,
      apiUrl: environment.DISCORD_API_URL,
      guildIds: environment.DISCORD_GUILD_IDS,
    },
    hub: {
      url: environment.SHEPHERD_HUB_URL,
      token: environment.SHEPHERD_HUB_TOKEN,
      datasetsServerUrl: environment.SHEPHERD_DATASETS_SERVER_URL,
    },
    checks: {
      preflightSteps: environment.SHEPHERD_PREFLIGHT_STEPS,
      preflightTimeoutS: environment.SHEPHERD_PREFLIGHT_TIMEOUT_S,
      gpuMemoryGb: environment.SHEPHERD_GPU_MEMORY_GB,
    },
    ops: {
      logFormat: environment.SHEPHERD_LOG_FORMAT,
      metricsToken: environment.SHEPHERD_METRICS_TOKEN,
      adminToken: environment.SHEPHERD_ADMIN_TOKEN,
    },
  };
}

function buildConfig(environment: Environment, secretValues: string[]) {
  return {
    /** Literal secret values (the bot's tokens, `SHEPHERD_RUN_ENV_*`), redacted from all that leaves. */
    secretValues,
    ...serviceSettings(environment),
    ...redisAuthSettings(environment),
    ...agentSettings(environment),
    ...runSettings(environment),
    ...backendSettings(environment),
    ...monitorSettings(environment),
    ...integrationSettings(environment),
    ...researchSettings(environment),
  };
}

export type Config = Readonly<ReturnType<typeof buildConfig>>;

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * Parse a configuration from an environment map. Throws a `ConfigError` naming every bad variable.
 * Pass `dotenvPath` to merge a `.env` file underneath the environment (the environment wins).
 */
export function loadConfig(
  environment: Record<string, string | undefined>,
  options: { dotenvPath?: string } = {},
): Config {
  let merged: Record<string, string | undefined> = environment;
  if (options.dotenvPath !== undefined && existsSync(options.dotenvPath)) {
    merged = { ...parseDotenv(readFileSync(options.dotenvPath)), ...environment };
  }
  const files = resolveSecretFiles(merged);
  merged = files.environment;
  const result = environmentSchema.superRefine(requirePlaygroundToken).safeParse(merged);
  if (
    result.success &&
    result.data.SHEPHERD_DEFAULT_ENV !== undefined &&
    result.data.SHEPHERD_ENVIRONMENTS[result.data.SHEPHERD_DEFAULT_ENV] === undefined
  ) {
    throw new ConfigError(
      `invalid configuration:\n  SHEPHERD_DEFAULT_ENV=${JSON.stringify(result.data.SHEPHERD_DEFAULT_ENV)}: not one of SHEPHERD_ENVIRONMENTS (${Object.keys(result.data.SHEPHERD_ENVIRONMENTS).join(', ') || 'none'})`,
    );
  }
  if (!result.success || files.problems.length > 0) {
    const lines = (result.error?.issues ?? []).map((issue) => {
      const variable = issue.path.join('.') || '(environment)';
      return `  ${variable}=${JSON.stringify(merged[variable] ?? '')}: ${issue.message}`;
    });
    throw new ConfigError(`invalid configuration:\n${[...files.problems, ...lines].join('\n')}`);
  }
  const redisProblem = redisAuthProblem(result.data);
  if (redisProblem !== undefined) throw new ConfigError(`invalid configuration:\n${redisProblem}`);
  if (result.data.SHEPHERD_DEFAULT_MAX_HOURS > result.data.SHEPHERD_MAX_HOURS) {
    throw new ConfigError(
      `invalid configuration:\n  SHEPHERD_DEFAULT_MAX_HOURS=${result.data.SHEPHERD_DEFAULT_MAX_HOURS}: must not be above SHEPHERD_MAX_HOURS=${result.data.SHEPHERD_MAX_HOURS}`,
    );
  }
  return deepFreeze(buildConfig(result.data, secretValuesOf(merged)));
}
