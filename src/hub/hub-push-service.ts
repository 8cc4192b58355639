import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { isApprover } from '../bot/approvers.js';
import type { ActionOutcome, ChatUser, InboundAction } from '../bot/chat-adapter.js';
import type { IdempotentNotifier } from '../bot/notifier.js';
import { createDecisionStore } from '../decisions/decision-store.js';
import { HubPushError } from '../errors.js';
import type { Logger } from '../logger.js';
import { type ControlJob, enqueue, JOBS } from '../queue/jobs.js';
import { readReproducibility, revisionLines } from '../runs/launch/launch-record.js';
import type { HubPush, RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import {
  formatBytes,
  type PushDecision,
  type PushRequest,
  type PushVerb,
  pushCard,
  pushDecisionSchema,
  pushRequestSchema,
  resolvedPushCard,
} from './hub-push-card.js';
import { hubErrorText, listModelFiles, uploadModel } from './hub-upload.js';
import { type ModelProvenance, modelCardReadme } from './model-card-readme.js';
import type { ModelSummary } from './model-summary.js';

/**
 * Push to Hub: the request (button, `push` command, agent tool) posts an approval card; an approver's click
 * records the decision and enqueues a control job; the job uploads (progress line edited at most every
 * 5 s), resolves the card and posts the model's URL, or the Hub's error. Nothing is announced before the
 * commit exists.
 */

const PROGRESS_EVERY_MS = 5000;
const REPO_ID = /^[\w.-]{1,96}\/[\w.-]{1,96}$/;

type HubPushJob = Extract<ControlJob, { kind: 'hub-push' }>;

interface PushOptions {
  repo?: string;
  public?: boolean;
}

export interface HubPushService {
  /** Posts the approval card for pushing a run's model; resolves the sentence for whoever asked. */
  request(reference: string, actor: ChatUser, threadId: string, options: PushOptions): Promise<string>;
  onAction(action: InboundAction, verb: PushVerb, pushId: string): Promise<ActionOutcome>;
  apply(job: HubPushJob): Promise<void>;
}

interface HubPushServiceOptions {
  redis: Redis;
  prefix: string;
  notifier: IdempotentNotifier;
  controlQueue: Queue;
  runs: RunQueries;
  recordHubPush(runId: string, push: HubPush): Promise<RunMeta>;
  summarise(meta: RunMeta): Promise<ModelSummary>;
  /** Who may approve (empty: anyone in the channel) and whether the asker may approve their own push. */
  approvers: readonly string[];
  selfApproval: boolean;
  hub: { url: string; token: string | undefined; namespace: string | undefined };
  logger: Logger;
  /** Minimum time between two edits of the progress line (default 5 s). */
  progressEveryMs?: number;
  /**
   * Waits (at most `waitMs`) for launch records still being captured, so the model card carries the
   * environment probe of a run that finished before its probe did (a short run, a slow `pip freeze`).
   */
  settleLaunchRecords?: (waitMs: number) => Promise<void>;
}

/** How long a push waits for a launch record's environment probe (the probe itself is bounded at 60 s). */
const LAUNCH_RECORD_WAIT_MS = 60_000;

const auditLine = z.object({ to: z.string(), from: z.string().nullable().optional(), by: z.unknown() });
const actor = z.object({ name: z.string() });

/** Who approved the run's launch: the first `pending_approval → queued` of its audit trail. */
async function runApprover(runDir: string): Promise<string | undefined> {
  const text = await readFile(path.join(runDir, 'audit.jsonl'), 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      continue;
    }
    const entry = auditLine.safeParse(parsed);
    if (!entry.success || entry.data.from !== 'pending_approval' || entry.data.to !== 'queued') continue;
    const by = actor.safeParse(entry.data.by);
    return by.success ? by.data.name : 'Shepherd (auto-approved)';
  }
  return undefined;
}

const gitSchema = z.object({ git: z.object({ commit: z.string(), dirty: z.boolean() }).optional() });

async function provenanceOf(
  runDir: string,
): Promise<Omit<ModelProvenance, 'pushRequester' | 'pushApprover' | 'pushedAt'>> {
  const recorded = await readFile(path.join(runDir, 'provenance.json'), 'utf8')
    .then((text) => gitSchema.safeParse(JSON.parse(text)))
    .catch(() => undefined);
  const script = await readFile(path.join(runDir, 'train.py')).catch(() => undefined);
  const provenance: Omit<ModelProvenance, 'pushRequester' | 'pushApprover' | 'pushedAt'> = {};
  if (recorded?.success && recorded.data.git !== undefined) provenance.git = recorded.data.git;
  if (script !== undefined && script.length > 0)
    provenance.scriptSha256 = createHash('sha256').update(script).digest('hex');
  const approver = await runApprover(runDir);
  if (approver !== undefined) provenance.runApprover = approver;
  const reproducibility = await readReproducibility(runDir);
  const revisions = revisionLines(reproducibility);
  if (revisions.length > 0) provenance.revisions = revisions;
  if (reproducibility.record !== undefined) provenance.launch = reproducibility.record;
  return provenance;
}

export function createHubPushService(options: HubPushServiceOptions): HubPushService {
  const { notifier, logger, hub } = options;
  const pushes = createDecisionStore(
    { name: 'hub-push', subject: pushRequestSchema, decision: pushDecisionSchema },
    { redis: options.redis, prefix: options.prefix, notifier },
  );

  /** The run and its model, checked before any card: every refusal is a sentence for the thread. */
  async function pushable(reference: string): Promise<RunMeta> {
    const meta = await options.runs.find(reference);
    if (meta.status !== 'completed')
      throw new HubPushError(
        'not_completed',
        `${meta.name} is ${meta.status}; only a completed run can be pushed`,
      );
    if (meta.model === undefined)
      throw new HubPushError(
        'no_model',
        `${meta.name} saved no model: the script calls \`shepherd.save_model(path)\` to name its final model directory`,
      );
    if (meta.model.location !== undefined)
      throw new HubPushError(
        'no_model',
        `${meta.name} saved its model inside ${meta.model.location}, whose files Shepherd cannot read: push it from the script (e.g. \`model.push_to_hub(...)\`)`,
      );
    return meta;
  }

  function repoIdFor(meta: RunMeta, repo: string | undefined): string {
    const repoId = repo ?? (hub.namespace === undefined ? undefined : `${hub.namespace}/${meta.name}`);
    if (repoId === undefined)
      throw new HubPushError(
        'invalid_repo',
        'give the repo as --repo namespace/name (SHEPHERD_HF_NAMESPACE is not set)',
      );
    if (!REPO_ID.test(repoId))
      throw new HubPushError('invalid_repo', `"${repoId}" is not a repo id; use namespace/name`);
    return repoId;
  }

  async function request(reference: string, asker: ChatUser, threadId: string, push: PushOptions) {
    if (hub.token === undefined)
      throw new HubPushError('no_token', 'Push to Hub needs SHEPHERD_HUB_TOKEN (a token with write access)');
    const meta = await pushable(reference);
    const repoId = repoIdFor(meta, push.repo);
    const modelPath = meta.model?.path ?? '';
    const files = await listModelFiles(modelPath).catch((error: unknown) => {
      throw new HubPushError(
        'no_model',
        `cannot read the model directory ${modelPath}: ${hubErrorText(error)}`,
      );
    });
    if (files.length === 0) throw new HubPushError('no_model', `the model directory ${modelPath} is empty`);
    const pushId = randomBytes(6).toString('hex');
    const subject: PushRequest = {
      schemaVersion: 1,
      runId: meta.id,
      runName: meta.name,
      threadId: meta.threadId,
      repoId,
      private: push.public !== true,
      files: files.map((file) => ({ path: file.path, size: file.size })),
      totalBytes: files.reduce((sum, file) => sum + file.size, 0),
      requester: asker,
      createdAt: new Date().toISOString(),
    };
    await pushes.save(pushId, subject);
    const posted = await notifier.postCard(meta.threadId, pushCard(subject, pushId));
    await pushes.setCardMessage(pushId, posted.messageId);
    logger.info({ runId: meta.id, repoId, by: asker.id, pushId }, 'push to the hub asked');
    const where = threadId === meta.threadId ? '' : ' (in its thread)';
    return `Push of ${meta.name} to ${repoId} (${subject.private ? 'private' : 'public'}, ${files.length} files + README.md, ${formatBytes(subject.totalBytes)}) is waiting for an approver on the card${where}.`;
  }

  /** The approval policy of runs (`SHEPHERD_APPROVERS`, `SHEPHERD_SELF_APPROVAL`); the asker may withdraw. */
  function refusal(subject: PushRequest, action: InboundAction, verb: PushVerb): string | undefined {
    const asker = action.user.id === subject.requester.id;
    if (verb === 'reject' && asker) return undefined;
    if (options.approvers.length > 0 && !isApprover(options.approvers, action.threadId, action.user))
      return `only approvers (${options.approvers.join(', ')}) can decide a push to the Hub`;
    if (verb === 'approve' && asker && !options.selfApproval)
      return 'team policy: you cannot approve your own push — ask a teammate';
    return undefined;
  }

  async function onAction(action: InboundAction, verb: PushVerb, pushId: string): Promise<ActionOutcome> {
    return pushes.click(pushId, {
      unknown: 'this push request no longer exists; ask again with `push <run>`',
      choose: async (subject) => {
        const refused = refusal(subject, action, verb);
        if (refused !== undefined) return { status: 'forbidden', message: refused };
        return { decision: { verb, user: action.user, at: new Date().toISOString() } };
      },
      lost: (winner) =>
        `this push was already ${winner.verb === 'approve' ? 'approved' : 'rejected'} by ${winner.user.name}`,
      enqueue: async (_subject, decision) => {
        if (decision.verb === 'reject') return settle(pushId);
        await enqueue(
          options.controlQueue,
          JOBS.hubPush,
          { v: 1, kind: 'hub-push', pushId },
          { jobId: `hub-push-${pushId}` },
        );
      },
      accepted: (decision) => (decision.verb === 'approve' ? 'approved; uploading' : 'rejected'),
    });
  }

  /** The upload with its progress line; resolves the outcome line (never throws: a failure is the outcome). */
  async function upload(subject: PushRequest, decision: PushDecision): Promise<string> {
    const who = decision.user.name;
    if (decision.verb === 'reject') return `Rejected by ${who}`;
    const progress = await notifier.post(
      subject.threadId,
      `⏫ Pushing ${subject.runName} to ${subject.repoId}: starting…`,
    );
    let lastEdit = Date.now();
    let editing: Promise<void> = Promise.resolve();
    const edit = (text: string) => {
      editing = editing
        .then(() => notifier.edit(subject.threadId, progress.messageId, text))
        .catch(() => undefined);
    };
    try {
      const meta = await pushable(subject.runId);
      const runDir = options.runs.runDirectory(meta.id);
      const files = await listModelFiles(meta.model?.path ?? '');
      await options.settleLaunchRecords?.(LAUNCH_RECORD_WAIT_MS);
      const pushedAt = new Date().toISOString();
      const readme = modelCardReadme(meta, await options.summarise(meta), {
        ...(await provenanceOf(runDir)),
        pushRequester: subject.requester.name,
        pushApprover: who,
        pushedAt,
      });
      const result = await uploadModel({
        hubUrl: hub.url,
        token: hub.token ?? '',
        repoId: subject.repoId,
        private: subject.private,
        files,
        readme,
        title: `Shepherd: ${meta.name} (run ${meta.id})`,
        onProgress: (fraction) => {
          if (Date.now() - lastEdit < (options.progressEveryMs ?? PROGRESS_EVERY_MS)) return;
          lastEdit = Date.now();
          edit(`⏫ Pushing ${subject.runName} to ${subject.repoId}: ${Math.round(fraction * 100)}%`);
        },
      });
      await options.recordHubPush(meta.id, {
        repoId: subject.repoId,
        url: result.url,
        commit: result.commit,
        private: subject.private,
        at: pushedAt,
        requester: subject.requester,
        approver: decision.user,
      });
      edit(`⏫ Pushed ${subject.runName} to ${subject.repoId}: 100%`);
      await editing;
      await notifier.post(
        subject.threadId,
        `📦 ${subject.runName} is on the Hub: ${result.url} (${result.created ? 'new repo' : 'new commit'} ${result.commit.slice(0, 8)})`,
      );
      return `Approved by ${who}; pushed to ${result.url}`;
    } catch (error) {
      const said = hubErrorText(error);
      logger.warn({ runId: subject.runId, repoId: subject.repoId, err: error }, 'push to the hub failed');
      edit(`❌ Push of ${subject.runName} to ${subject.repoId} failed`);
      await editing;
      await notifier.post(
        subject.threadId,
        `❌ Push of ${subject.runName} to ${subject.repoId} failed: ${said}`,
      );
      return `Approved by ${who}; the push failed: ${said}`;
    }
  }

  async function settle(pushId: string): Promise<void> {
    await pushes.settle(pushId, {
      effect: upload,
      resolvedCard: (subject, _decision, outcome) => resolvedPushCard(subject, outcome),
    });
  }

  return { request, onAction, apply: (job) => settle(job.pushId) };
}
