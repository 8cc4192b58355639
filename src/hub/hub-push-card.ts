import { z } from 'zod';
import type { Card } from '../bot/chat-adapter.js';

/** The Push to Hub approval card: what is stored for it, its buttons, and the card before and after. */

/** `hub-push-approve:<push id>`, `hub-push-reject:<push id>`; the action router keys on these. */
export const PUSH_ACTIONS = { approve: 'hub-push-approve', reject: 'hub-push-reject' } as const;
export type PushVerb = keyof typeof PUSH_ACTIONS;

const user = z.object({ id: z.string(), name: z.string() });

export const pushRequestSchema = z.object({
  schemaVersion: z.literal(1),
  runId: z.string(),
  runName: z.string(),
  threadId: z.string(),
  repoId: z.string(),
  private: z.boolean(),
  files: z.array(z.object({ path: z.string(), size: z.number().int().nonnegative() })),
  totalBytes: z.number().int().nonnegative(),
  requester: user,
  cardMessageId: z.string().optional(),
  createdAt: z.string(),
});
export type PushRequest = z.infer<typeof pushRequestSchema>;

export const pushDecisionSchema = z.object({
  verb: z.enum(['approve', 'reject']),
  user,
  at: z.string(),
});
export type PushDecision = z.infer<typeof pushDecisionSchema>;

export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** At most this many files are listed on the card; the rest are counted. */
const LISTED_FILES = 15;

function fileList(request: PushRequest): string {
  const shown = request.files
    .slice(0, LISTED_FILES)
    .map((file) => `• ${file.path} (${formatBytes(file.size)})`);
  const more = request.files.length - LISTED_FILES;
  if (more > 0) shown.push(`… and ${more} more`);
  return shown.join('\n');
}

export function pushCard(request: PushRequest, pushId: string): Card {
  const visibility = request.private ? 'private' : 'public';
  return {
    title: `Push ${request.runName} to the Hub?`,
    text: `${request.requester.name} asks to publish ${request.runName}'s model as a ${visibility} repo, with a generated README.md (model card).\n${fileList(request)}`,
    fields: [
      { label: 'Asked by', value: request.requester.name },
      { label: 'Repo', value: request.repoId },
      { label: 'Visibility', value: visibility },
      { label: 'Files', value: `${request.files.length} + README.md, ${formatBytes(request.totalBytes)}` },
    ],
    actions: [
      { actionId: `${PUSH_ACTIONS.approve}:${pushId}`, label: 'Approve push', style: 'primary' },
      { actionId: `${PUSH_ACTIONS.reject}:${pushId}`, label: 'Reject', style: 'danger' },
    ],
  };
}

export function resolvedPushCard(request: PushRequest, outcome: string): Card {
  const { actions: _actions, ...card } = pushCard(request, '');
  return { ...card, resolved: outcome };
}
