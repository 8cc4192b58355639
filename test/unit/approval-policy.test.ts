import { describe, expect, it } from 'vitest';
import { type ApprovalPolicy, checkDecision, isAutoApproved } from '../../src/approvals/approval-policy.js';
import type { Approval } from '../../src/approvals/approval-store.js';
import { isApprover, isListedUser, platformOfThread } from '../../src/bot/approvers.js';
import { RunError } from '../../src/errors.js';
import { estimateCostUsd } from '../../src/runs/run-cost.js';

const alice = { id: 'U0ALICE', name: 'alice' };
const bob = { id: 'U0BOB', name: 'bob' };
const carol = { id: 'U0CAROL', name: 'carol' };

function approvalBy(
  requester: { id: string; name: string },
  threadId = 'slack:C01:1700000000.000100',
): Approval {
  return {
    schemaVersion: 1,
    id: 'ap_test',
    kind: 'start',
    runId: 'run_1',
    runName: 'tiny-gpt',
    threadId,
    requester,
    gpus: 2,
    maxHours: 3,
    costUsd: 12,
    scriptExcerpt: 'print(1)',
    origin: 'command',
    createdAt: '2026-01-01T00:00:00.000Z',
    expiresAt: '2026-01-02T00:00:00.000Z',
  };
}

const policy = (overrides: Partial<ApprovalPolicy> = {}): ApprovalPolicy => ({
  approvers: [],
  selfApproval: false,
  autoApproveUsd: 0,
  ...overrides,
});

describe('checkDecision: who may approve or reject', () => {
  it('lets anyone in the channel approve when no approvers are listed', () => {
    expect(checkDecision(policy(), approvalBy(alice), bob, 'approved')).toEqual({ allowed: true });
    expect(checkDecision(policy(), approvalBy(alice), carol, 'rejected')).toEqual({ allowed: true });
  });

  it('refuses self-approval unless the policy allows it', () => {
    const refused = checkDecision(policy(), approvalBy(alice), alice, 'approved');
    expect(refused).toEqual({
      allowed: false,
      reason: 'team policy: you cannot approve your own job — ask a teammate',
    });
    expect(checkDecision(policy({ selfApproval: true }), approvalBy(alice), alice, 'approved')).toEqual({
      allowed: true,
    });
  });

  it('always lets the requester withdraw (reject) their own job, approver or not', () => {
    const strict = policy({ approvers: ['U0BOB'] });
    expect(checkDecision(strict, approvalBy(alice), alice, 'rejected')).toEqual({ allowed: true });
    expect(checkDecision(policy(), approvalBy(alice), alice, 'rejected')).toEqual({ allowed: true });
  });

  it('lets only listed approvers approve or reject someone else’s job', () => {
    const strict = policy({ approvers: ['U0BOB', 'discord:42'] });
    expect(checkDecision(strict, approvalBy(alice), bob, 'approved')).toEqual({ allowed: true });
    expect(checkDecision(strict, approvalBy(alice), bob, 'rejected')).toEqual({ allowed: true });
    expect(checkDecision(strict, approvalBy(alice), carol, 'approved')).toEqual({
      allowed: false,
      reason: 'only approvers (U0BOB, discord:42) can approve this job',
    });
    expect(checkDecision(strict, approvalBy(alice), carol, 'rejected')).toEqual({
      allowed: false,
      reason: 'only approvers (U0BOB, discord:42) can reject this job',
    });
  });

  it('still refuses an approver’s self-approval when the policy forbids it', () => {
    const strict = policy({ approvers: ['U0ALICE'] });
    expect(checkDecision(strict, approvalBy(alice), alice, 'approved')).toMatchObject({ allowed: false });
    expect(checkDecision({ ...strict, selfApproval: true }, approvalBy(alice), alice, 'approved')).toEqual({
      allowed: true,
    });
  });

  it('refuses a requester who is not an approver even with self-approval on', () => {
    const strict = policy({ approvers: ['U0BOB'], selfApproval: true });
    expect(checkDecision(strict, approvalBy(alice), alice, 'approved')).toEqual({
      allowed: false,
      reason: 'only approvers (U0BOB) can approve this job',
    });
  });

  it('matches approvers by id on the thread’s platform, never by display name', () => {
    const strict = policy({ approvers: ['slack:U0BOB'] });
    const impostor = { id: 'U0MALLORY', name: 'U0BOB' };
    expect(checkDecision(strict, approvalBy(alice), impostor, 'approved')).toMatchObject({ allowed: false });
    // The same id on another platform is another person.
    const onDiscord = approvalBy(alice, 'discord:123:456');
    expect(checkDecision(strict, onDiscord, bob, 'approved')).toMatchObject({ allowed: false });
    expect(checkDecision(strict, approvalBy(alice), bob, 'approved')).toEqual({ allowed: true });
  });

  it('refuses everyone on a listed policy when the thread id is malformed', () => {
    const strict = policy({ approvers: ['U0BOB'] });
    expect(checkDecision(strict, approvalBy(alice, 'not-a-thread'), bob, 'approved')).toMatchObject({
      allowed: false,
    });
  });
});

describe('estimateCostUsd', () => {
  it('is GPUs × hours × price, rounded to cents', () => {
    expect(estimateCostUsd(2, 3, 2.5)).toBe(15);
    expect(estimateCostUsd(1, 1, 1.005)).toBe(1);
    expect(estimateCostUsd(3, 0.5, 1.333)).toBe(2);
    expect(estimateCostUsd(1, 0.1, 0.333)).toBe(0.03);
  });

  it('is free for CPU-only jobs or a zero price', () => {
    expect(estimateCostUsd(0, 10, 2)).toBe(0);
    expect(estimateCostUsd(4, 10, 0)).toBe(0);
  });

  it('refuses unbounded or negative requests with invalid_run', () => {
    for (const [gpus, hours, price] of [
      [Number.POSITIVE_INFINITY, 1, 1],
      [1, Number.POSITIVE_INFINITY, 1],
      [1, Number.NaN, 1],
      [-1, 1, 1],
      [1, 1, -2],
    ] as const) {
      const attempt = () => estimateCostUsd(gpus, hours, price);
      expect(attempt).toThrow(RunError);
      expect(attempt).toThrow(/cannot estimate the cost/);
      try {
        attempt();
      } catch (error) {
        expect(error).toMatchObject({ code: 'invalid_run', retryable: false });
      }
    }
  });
});

describe('isAutoApproved', () => {
  it('is off when the threshold is 0', () => {
    expect(isAutoApproved(policy({ autoApproveUsd: 0 }), 0)).toBe(false);
    expect(isAutoApproved(policy({ autoApproveUsd: 0 }), 5)).toBe(false);
  });

  it('approves jobs at or under the threshold only', () => {
    const cheap = policy({ autoApproveUsd: 10 });
    expect(isAutoApproved(cheap, 0)).toBe(true);
    expect(isAutoApproved(cheap, 10)).toBe(true);
    expect(isAutoApproved(cheap, 10.01)).toBe(false);
  });

  it('sends a job that would pass the monthly budget to a person, whatever its size', () => {
    const cheap = policy({ autoApproveUsd: 10 });
    expect(isAutoApproved(cheap, 5, { limitUsd: 100, leftUsd: 4 })).toBe(false);
    expect(isAutoApproved(cheap, 5, { limitUsd: 100, leftUsd: 5 })).toBe(true);
    expect(isAutoApproved(cheap, 5, { limitUsd: 100, leftUsd: 50 })).toBe(true);
    // Within budget but over the threshold still needs a person.
    expect(isAutoApproved(cheap, 20, { limitUsd: 100, leftUsd: 50 })).toBe(false);
  });
});

describe('approvers list', () => {
  it('matches an unprefixed entry on any platform and a prefixed one only on its platform', () => {
    expect(isListedUser(['U0BOB'], 'slack', bob)).toBe(true);
    expect(isListedUser(['U0BOB'], 'discord', bob)).toBe(true);
    expect(isListedUser(['slack:U0BOB'], 'slack', bob)).toBe(true);
    expect(isListedUser(['slack:U0BOB'], 'discord', bob)).toBe(false);
    expect(isListedUser(['web:bob'], 'web', { id: 'bob', name: 'Bob' })).toBe(true);
    expect(isListedUser([], 'slack', bob)).toBe(false);
  });

  it('compares ids exactly (no prefix or display-name matches)', () => {
    expect(isListedUser(['U0BO'], 'slack', bob)).toBe(false);
    expect(isListedUser(['U0BOB'], 'slack', { id: 'U0MALLORY', name: 'U0BOB' })).toBe(false);
    expect(isListedUser(['slack:'], 'slack', bob)).toBe(false);
  });

  it('reads the platform from the thread id, and nobody matches a malformed one', () => {
    expect(platformOfThread('discord:1:2')).toBe('discord');
    expect(platformOfThread('web:general:t1')).toBe('web');
    expect(platformOfThread('irc:x:y')).toBeUndefined();
    expect(platformOfThread('slack')).toBeUndefined();
    expect(isApprover(['U0BOB'], 'slack:C1:1.2', bob)).toBe(true);
    expect(isApprover(['discord:U0BOB'], 'slack:C1:1.2', bob)).toBe(false);
    expect(isApprover(['U0BOB'], 'garbage', bob)).toBe(false);
  });
});
