import type { EditChecks } from '../approvals/approval-edits.js';
import type { Approval, Decision } from '../approvals/approval-store.js';
import { ServiceError } from '../errors.js';
import type { RunEvent } from '../runs/lifecycle/run-events.js';

/**
 * What a feature does for the others, contributed through its description (`Feature.hooks`) rather than
 * bound into closures after the fact. Features composed earlier call the board; `features.ts` installs the
 * finished list once, so who answers each hook is visible in the features' descriptions.
 */
export interface FeatureHooks {
  /** Told of every run event (the monitor starts watching a started run). */
  onRunEvent?: (event: RunEvent) => Promise<void>;
  /** Decides and edits a sweep's approval card (the sweep service owns those). */
  sweepCards?: {
    decide(approval: Approval, decision: Decision): Promise<string>;
    checkEdit: NonNullable<EditChecks['checkSweepEdit']>;
  };
  /** Compiles a script (an edited script on an approval card). */
  checkSyntax?: (source: string) => Promise<string | undefined>;
}

interface HookBoard {
  runEvent(event: RunEvent): Promise<void>;
  sweepDecision(approval: Approval, decision: Decision): Promise<string>;
  sweepEdit: NonNullable<EditChecks['checkSweepEdit']>;
  checkSyntax(source: string): Promise<string | undefined>;
  /** Takes the composed features' hooks; once, before any worker starts. */
  install(contributions: ReadonlyArray<{ hooks?: FeatureHooks }>): void;
}

export function createHookBoard(): HookBoard {
  let installed: FeatureHooks[] | undefined;
  // A single-owner hook: the one feature that contributes it.
  const owner = <K extends keyof FeatureHooks>(name: K): NonNullable<FeatureHooks[K]> => {
    const found = installed?.find((hooks) => hooks[name] !== undefined)?.[name];
    if (found === undefined)
      throw new ServiceError('not_ready', `no feature answers ${name} (the features are not composed yet)`, {
        retryable: true,
      });
    return found as NonNullable<FeatureHooks[K]>;
  };
  return {
    async runEvent(event) {
      // Before install no run can have started (workers start after composing): nothing listens yet.
      for (const hooks of installed ?? []) await hooks.onRunEvent?.(event);
    },
    // Async, so a missing owner is a rejected promise like any other failure of the hook.
    sweepDecision: async (approval, decision) => owner('sweepCards').decide(approval, decision),
    sweepEdit: async (sweepId, edit) => owner('sweepCards').checkEdit(sweepId, edit),
    checkSyntax: async (source) => owner('checkSyntax')(source),
    install(contributions) {
      if (installed !== undefined) throw new Error('feature hooks are installed once');
      installed = contributions.flatMap((contribution) =>
        contribution.hooks === undefined ? [] : [contribution.hooks],
      );
    },
  };
}
