import { z } from 'zod';
import { BACKEND_KINDS } from '../../config/backend-kinds.js';
import { RUN_STATUSES, type RunMeta } from './run-types.js';

const user = z.object({ id: z.string(), name: z.string() });

/** zod schema for `meta.json`; a file that does not match is reported, never half-trusted. */
const runMetaSchema = z.object({
  schemaVersion: z.literal(1),
  id: z.string().min(1),
  name: z.string().min(1),
  threadId: z.string(),
  requester: user,
  status: z.enum(RUN_STATUSES),
  statusReason: z.string().optional(),
  gpus: z.number().int().nonnegative(),
  gpuIndices: z.array(z.number().int().nonnegative()),
  maxHours: z.number().positive(),
  modelId: z.string().optional(),
  config: z.record(z.string(), z.unknown()).optional(),
  args: z.array(z.string()).optional(),
  scriptVersion: z.number().int().positive(),
  executor: z.enum(BACKEND_KINDS),
  image: z.string().optional(),
  flavor: z.string().optional(),
  placement: z.string().optional(),
  placementNotes: z.array(z.string()).optional(),
  hourlyUsd: z.number().nonnegative().optional(),
  pid: z.number().int().optional(),
  pgid: z.number().int().optional(),
  processStartTime: z.string().optional(),
  jobId: z.string().optional(),
  launchCount: z.number().int().nonnegative(),
  deadlineAt: z.string().optional(),
  segment: z.object({ index: z.number().int().positive(), of: z.number().int().positive() }).optional(),
  nextSegment: z.number().int().positive().optional(),
  queuedAt: z.string().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  startedAt: z.string().optional(),
  endedAt: z.string().optional(),
  exitCode: z.number().int().optional(),
  exitSignal: z.string().optional(),
  lastStep: z.number().optional(),
  command: z.array(z.string()).min(1).optional(),
  cwd: z.string().optional(),
  scriptPath: z.string().optional(),
  environmentName: z.string().optional(),
  nodes: z.number().int().positive().optional(),
  stopRequested: z.enum(['pause', 'stop']).optional(),
  autoRelaunches: z
    .array(
      z.object({
        at: z.string(),
        launch: z.number().int(),
        cause: z.string(),
        from: z.number().nullable(),
      }),
    )
    .optional(),
  priorHours: z.number().nonnegative().optional(),
  forkOf: z
    .object({
      runId: z.string(),
      runName: z.string(),
      step: z.number(),
      checkpoint: z.string().nullable(),
    })
    .optional(),
  watch: z
    .discriminatedUnion('source', [
      z.object({ source: z.literal('slurm'), logPath: z.string() }),
      z.object({ source: z.literal('kubernetes'), namespace: z.string(), job: z.string() }),
      z.object({ source: z.literal('hfjobs'), jobId: z.string(), namespace: z.string().optional() }),
      z.object({
        source: z.literal('log'),
        logPath: z.string(),
        pid: z.number().int().positive().optional(),
        pidStartTime: z.string().optional(),
      }),
    ])
    .optional(),
  evalCommand: z.string().min(1).optional(),
  logDir: z.string().min(1).optional(),
  evaluation: z
    .object({
      status: z.enum(['passed', 'failed']),
      exitCode: z.number().int().optional(),
      results: z.record(z.string(), z.number()),
      startedAt: z.string().optional(),
      endedAt: z.string().optional(),
    })
    .optional(),
  model: z
    .object({
      path: z.string(),
      info: z.record(z.string(), z.unknown()),
      step: z.number().optional(),
      savedAt: z.string(),
      location: z.string().optional(),
    })
    .optional(),
  hubPushes: z
    .array(
      z.object({
        repoId: z.string(),
        url: z.string(),
        commit: z.string(),
        private: z.boolean(),
        at: z.string(),
        requester: user,
        approver: user,
      }),
    )
    .optional(),
});

/** Parse an untrusted value into a `RunMeta`; throws a zod error naming the bad fields. */
export function parseRunMeta(value: unknown): RunMeta {
  const parsed = runMetaSchema.parse(value);
  // zod marks absent optionals as `undefined`-able; drop them so the object fits exactOptionalPropertyTypes.
  const clean = Object.fromEntries(Object.entries(parsed).filter(([, inner]) => inner !== undefined));
  return clean as unknown as RunMeta;
}
