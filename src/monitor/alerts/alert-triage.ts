import type { Redis } from 'ioredis';
import type { LlmProvider } from '../../agent/llm-provider.js';
import { runInLlmScope } from '../../agent/llm-scope.js';
import type { ChatUser } from '../../bot/chat-adapter.js';
import type { Notifier } from '../../bot/notifier.js';
import { definedOnly } from '../../defined-only.js';
import { errorMessage } from '../../errors.js';
import type { CheckpointHistory } from '../../runs/checkpoints/checkpoint-history.js';
import type { RunOperations } from '../../runs/operations/operation-types.js';
import type { RunMeta } from '../../runs/records/run-types.js';
import type { RunQueries } from '../../runs/run-queries.js';
import { codeBlock } from '../../text/code-block.js';
import { redactedHead } from '../../text/redact.js';
import type { Monitor } from '../monitor-types.js';
import type { TriageSnapshot } from '../triage-snapshot.js';
import { type Alert, incidentOfAlert } from './alert-card.js';
import { checkPythonSyntax, type TriageResult, triage } from './triage.js';

/**
 * Triage of one alert (automatic or asked for): the model sees a snapshot of the run and answers LGTM,
 * WARNING or FIX; a FIX goes through the same script-change approval as a person's change, capped at
 * `maxAutofix` per run (counted in Redis before the card goes out, so restarts and retries never pass it).
 */

export const SHEPHERD: ChatUser = { id: 'shepherd', name: 'Shepherd' };
/** Incidents whose fix must not resume from a checkpoint saved on already-broken weights. */
export const WEIGHT_INCIDENTS: ReadonlySet<string> = new Set(['nan', 'divergence', 'spike']);

interface AlertTriageOptions {
  redis: Redis;
  prefix: string;
  monitor: Pick<Monitor, 'snapshot'>;
  queries: RunQueries;
  operations: RunOperations;
  notifier: Notifier;
  provider: LlmProvider;
  maxAutofix: number;
  python: string;
  /** Environment for the syntax check (the same one training processes get). */
  environment: Readonly<Record<string, string | undefined>>;
  checkpoints?: CheckpointHistory;
}

interface AlertTriage {
  run(alert: Alert, askedBy: ChatUser): Promise<void>;
}

/** The fix count outlives a run's end long enough for a fix, a resume and another fix; then it goes. */
const AUTOFIX_KEEP_S = 30 * 24 * 3600;

export function createAlertTriage(options: AlertTriageOptions): AlertTriage {
  const { redis, notifier } = options;
  const autofixKey = (runId: string) => `${options.prefix}:autofix:${runId}`;
  const autofixCount = async (runId: string) => Number((await redis.get(autofixKey(runId))) ?? 0);

  /** What the model is shown: the run, its process, its script, and which detector fired on what. */
  async function snapshotOf(alert: Alert, meta: RunMeta): Promise<TriageSnapshot> {
    const processState = (await options.queries.processState(meta)) ?? { kind: 'unknown' as const };
    const script = await options.queries.readScript(meta.id).catch(() => undefined);
    const incident = { ...incidentOfAlert(alert), runId: meta.id };
    return options.monitor.snapshot({ meta, processState, incident, ...definedOnly({ script }) });
  }

  async function ask(alert: Alert, askedBy: ChatUser, snapshot: TriageSnapshot): Promise<TriageResult> {
    return triage({
      snapshot,
      ask: async (prompt) => {
        // Billed to the alert's thread and to whoever asked (Shepherd itself for an automatic triage).
        const response = await runInLlmScope({ threadId: alert.threadId, person: askedBy }, () =>
          options.provider.complete({
            system:
              'You are Shepherd, an ML training run doctor. Answer only with the JSON object asked for.',
            messages: [{ role: 'user', author: askedBy.name, content: prompt }],
            tools: [],
            reason: `triage:${alert.kind}`,
          }),
        );
        return response.text;
      },
    });
  }

  /** Why a FIX answer is not proposed (a partial script, a script that does not compile), or undefined. */
  async function refusal(
    alert: Alert,
    meta: RunMeta,
    snapshot: TriageSnapshot,
    diagnosis: string,
    script: string,
  ) {
    if (snapshot.scriptComplete === false) {
      // The model saw a cut or redacted script: its "complete new train.py" would lose the rest.
      return `Triage of ${meta.name} (${alert.kind}): needs attention — ${diagnosis}\nI am not proposing a script change: train.py is too long or holds secrets, so I only saw part of it. A person should make this change.`;
    }
    const syntax = await checkPythonSyntax(script, options.python, options.environment);
    if (!syntax.ok)
      return `Triage of ${meta.name}: ${diagnosis}\nThe proposed script does not compile, so I am not proposing it:\n${codeBlock(redactedHead(syntax.error, 800))}`;
    return undefined;
  }

  async function run(alert: Alert, askedBy: ChatUser): Promise<void> {
    const meta = await options.queries.find(alert.runId);
    const used = await autofixCount(meta.id);
    if (used >= options.maxAutofix) {
      await notifier.post(
        alert.threadId,
        `${meta.name}: Shepherd has already proposed ${used} fixes for this run (the limit is ${options.maxAutofix}); a person must look at it now.`,
      );
      return;
    }
    const snapshot = await snapshotOf(alert, meta);
    let result: TriageResult;
    try {
      result = await ask(alert, askedBy, snapshot);
    } catch (error) {
      await notifier.post(
        alert.threadId,
        `${meta.name}: I could not reach the model to triage this (${errorMessage(error)}). Plain commands still work.`,
      );
      return;
    }
    if (result.decision !== 'FIX') {
      const label = result.decision === 'LGTM' ? 'looks fine' : 'needs attention';
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name} (${alert.kind}): ${label} — ${result.diagnosis}`,
      );
      return;
    }
    const refused = await refusal(alert, meta, snapshot, result.diagnosis, result.script);
    if (refused !== undefined) {
      await notifier.post(alert.threadId, refused);
      return;
    }
    await proposeFix(alert, meta, result);
  }

  async function proposeFix(alert: Alert, meta: RunMeta, result: Extract<TriageResult, { decision: 'FIX' }>) {
    // Counted before the card goes out so a restart or a retry can never exceed the cap.
    const key = autofixKey(meta.id);
    const results = await redis.multi().incr(key).expire(key, AUTOFIX_KEEP_S).exec();
    const count = Number(results?.[0]?.[1] ?? Number.POSITIVE_INFINITY);
    if (count > options.maxAutofix) {
      await notifier.post(
        alert.threadId,
        `${meta.name}: the limit of ${options.maxAutofix} automatic fixes is reached; a person must look at it now.`,
      );
      return;
    }
    const resume = await resumePoint(alert, meta);
    try {
      const pinned = await options.checkpoints?.pinFix(meta.id, {
        script: result.script,
        fix: count,
        maxFixes: options.maxAutofix,
        kind: alert.kind,
        ...definedOnly({ resume }),
      });
      const proposal = await options.operations.updateScript(
        meta.id,
        result.script,
        resume === undefined
          ? result.diagnosis
          : `${result.diagnosis}\n${resume.text}${pinned === undefined ? '' : ` ${pinned}`}`,
        SHEPHERD,
        alert.threadId,
        'monitor',
      );
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name}: ${result.diagnosis}\nI proposed a fix (${count} of ${options.maxAutofix}); it needs approval on the card. ${proposal.text}`,
      );
    } catch (error) {
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name}: ${result.diagnosis}\nThe fix could not be proposed: ${errorMessage(error)}`,
      );
    }
  }

  /** A fix for broken weights resumes from the last healthy checkpoint before the first bad step. */
  async function resumePoint(alert: Alert, meta: RunMeta) {
    if (!WEIGHT_INCIDENTS.has(alert.kind) || alert.firstBadStep === undefined) return undefined;
    return options.checkpoints?.chooseResumePoint(meta.id, {
      launch: alert.launch ?? meta.launchCount,
      kind: alert.kind,
      firstBadStep: alert.firstBadStep,
    });
  }

  return { run };
}
