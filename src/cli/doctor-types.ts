type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface CheckOutcome {
  /** What was checked, e.g. `redis`, `llm`, `slack`. */
  name: string;
  status: CheckStatus;
  /** What was found, in one line. */
  detail: string;
  /** One line saying how to fix a warning or failure. */
  fix?: string;
}

export function outcome(name: string, status: CheckStatus, detail: string, fix?: string): CheckOutcome {
  return fix === undefined ? { name, status, detail } : { name, status, detail, fix };
}

/** Time limit for each network probe: doctor must answer quickly even when a service hangs. */
export const PROBE_TIMEOUT_MS = 5000;

export function errorText(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    const causeText = cause instanceof Error ? `: ${cause.message}` : '';
    return `${error.message}${causeText}`;
  }
  return String(error);
}
