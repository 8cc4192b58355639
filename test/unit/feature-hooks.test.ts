/**
 * The features' hook board: earlier features reach later ones only through hooks the later features'
 * descriptions contribute. Run events go to every listener in order; a single-owner hook (sweep cards,
 * script checks) asked before the features are composed fails with a typed, retryable error.
 */
import { describe, expect, it } from 'vitest';
import { createHookBoard } from '../../src/app/feature-hooks.js';
import type { Approval, Decision } from '../../src/approvals/approval-store.js';
import { ServiceError } from '../../src/errors.js';
import type { RunEvent } from '../../src/runs/lifecycle/run-events.js';
import { testRunMeta } from '../helpers/run-meta.js';

const started = { type: 'run-started', meta: testRunMeta('r-1'), message: 'started' } as RunEvent;

describe('feature hook board', () => {
  it('hands every run event to each listener, in the order the features were listed', async () => {
    const board = createHookBoard();
    const heard: string[] = [];
    board.install([
      { hooks: { onRunEvent: async (event) => void heard.push(`monitor:${event.type}`) } },
      {},
      { hooks: { onRunEvent: async (event) => void heard.push(`other:${event.meta.id}`) } },
    ]);
    await board.runEvent(started);
    expect(heard).toEqual(['monitor:run-started', 'other:r-1']);
  });

  it('routes sweep cards and script checks to the feature that contributes them', async () => {
    const board = createHookBoard();
    board.install([
      { hooks: { checkSyntax: async (source) => (source.includes('(') ? undefined : 'no call') } },
      {
        hooks: {
          sweepCards: {
            decide: async (approval) => `sweep ${approval.runId} decided`,
            checkEdit: async (sweepId, edit) => ({ gpus: edit.gpus ?? 1, maxHours: 1, name: sweepId }),
          },
        },
      },
    ]);
    expect(await board.checkSyntax('print(1)')).toBeUndefined();
    expect(await board.checkSyntax('print')).toBe('no call');
    const approval = { runId: 'sw-1' } as Approval;
    expect(await board.sweepDecision(approval, {} as Decision)).toBe('sweep sw-1 decided');
    expect(await board.sweepEdit('sw-1', { gpus: 4 })).toEqual({ gpus: 4, maxHours: 1, name: 'sw-1' });
  });

  it('fails clearly when a hook is asked before the features are composed, and installs once', async () => {
    const board = createHookBoard();
    await board.runEvent(started); // nobody listens yet: not an error
    const error = await board.checkSyntax('x = 1').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe('not_ready');
    board.install([]);
    expect(() => board.install([])).toThrow(/once/);
    await expect(board.sweepDecision({ runId: 'sw' } as Approval, {} as Decision)).rejects.toMatchObject({
      code: 'not_ready',
    });
  });
});
