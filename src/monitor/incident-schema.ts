import { z } from 'zod';
import { trackerLinksSchema } from '../runs/tracker-links.js';
import type { CrashClass } from './detectors/crash.js';
import type { Incident, IncidentKind } from './types.js';

/**
 * An incident read back from Redis (the monitor's outbox) is checked against this, not cast. Kept beside
 * types.ts rather than in it: the playground's page imports types.ts and must not pull zod in.
 */

/** Every kind once; the mapped type makes a kind added to `IncidentKind` and missing here fail to compile. */
const INCIDENT_KINDS: { [Kind in IncidentKind]: Kind } = {
  crash: 'crash',
  nan: 'nan',
  spike: 'spike',
  divergence: 'divergence',
  plateau: 'plateau',
  stall: 'stall',
  finished: 'finished',
  overfitting: 'overfitting',
  throughput: 'throughput',
  grad_norm: 'grad_norm',
  idle_gpu: 'idle_gpu',
  rule: 'rule',
  eval_failed: 'eval_failed',
  script_alert: 'script_alert',
};

export const incidentSchema = z
  .object({
    id: z.string(),
    runId: z.string(),
    kind: z.enum(INCIDENT_KINDS),
    severity: z.enum(['info', 'warning', 'critical']),
    title: z.string(),
    summary: z.string(),
    metrics: z.array(z.string()),
    step: z.number().exactOptional(),
    highlightSteps: z.tuple([z.number(), z.number()]).exactOptional(),
    traceback: z.string().exactOptional(),
    stackDump: z.string().exactOptional(),
    // Written by us from a closed list; a class this version does not know still reads as a crash class.
    crashClass: z.custom<CrashClass>((value) => typeof value === 'string').exactOptional(),
    exitCode: z.number().exactOptional(),
    signal: z.string().exactOptional(),
    retries: z.array(z.string()).exactOptional(),
    links: trackerLinksSchema.exactOptional(),
    launch: z.number().exactOptional(),
    at: z.number(),
  })
  // A field a newer version added rides along untouched, as it did before the outbox was checked.
  .loose() satisfies z.ZodType<Incident>;
