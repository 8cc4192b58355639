import { UnrecoverableError } from 'bullmq';
import type { z } from 'zod';

/*
 * A job whose payload does not parse (wrong shape, malformed thread id) will never parse: it fails at
 * once as an UnrecoverableError instead of spending its retries.
 */

export function parseJobPayload<T>(schema: z.ZodType<T>, data: unknown, queue: string): T {
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const where = issue === undefined || issue.path.length === 0 ? 'payload' : issue.path.join('.');
  throw new UnrecoverableError(`malformed ${queue} job: ${where}: ${issue?.message ?? 'invalid'}`);
}

/** Logs a connection-level error of a BullMQ Worker, Queue or QueueEvents (without a listener it crashes the process). */
export function logQueueErrors(
  emitter: { on(event: 'error', listener: (error: Error) => void): unknown },
  logger: { warn(object: object, message: string): void } | undefined,
  what: string,
): void {
  emitter.on('error', (error: Error) => {
    if (logger !== undefined) logger.warn({ err: error, component: what }, `${what}: redis error`);
    else process.stderr.write(`shepherd: ${what}: redis error: ${error.message}\n`);
  });
}
