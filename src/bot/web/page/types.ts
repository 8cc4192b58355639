/** The JSON shapes the page reads from the playground API (mirrors web-store.ts, which the browser cannot import). */

export interface CardAction {
  actionId: string;
  label: string;
  style?: string;
}

interface Card {
  title?: string;
  text?: string;
  fields?: { label: string; value: string }[];
  imageUrl?: string;
  actions?: CardAction[];
  resolved?: string;
  /** The whole file behind a cut excerpt (a long script or diff), shown folded. */
  attachment?: { filename: string; text: string };
}

export interface Message {
  id: string;
  channel: string;
  threadId: string;
  user: string;
  text: string;
  ts: number;
  editedAt?: number;
  card?: Card;
  images?: string[];
  files?: { name: string; url: string }[];
  visibleTo?: string;
}

interface ThreadSummary {
  threadId: string;
  user: string;
  preview: string;
  ts: number;
  lastActivity: number;
}

export interface ChannelSummary {
  channel: string;
  threads: ThreadSummary[];
}

/** JSON has no NaN: non-finite metric values arrive as these strings. */
export type MetricValue = number | 'NaN' | 'Infinity' | '-Infinity';

export interface RunRow {
  id: string;
  name: string;
  status: string;
  statusReason?: string;
  gpus: number;
  gpuIndices: number[];
  step?: number;
  requester: string;
  thread: { threadId: string; href?: string };
  /** The buttons that apply to the run's status (a running run has no Resume). */
  actions?: Array<'pause' | 'resume' | 'stop'>;
  lossMetric?: string;
  loss?: MetricValue[];
  checkpoints?: { step: number; checkpoint: string | null; ts?: number }[];
  /** Links to the run in its trackers (W&B, MLflow…): a URL, or the command that opens the dashboard. */
  trackers?: { label: string; value: string }[];
}

export interface MetricsResponse {
  run: string;
  names: string[];
  points: { step?: number; ts?: number; values: Record<string, MetricValue> }[];
}

export type TraceStep =
  | {
      kind: 'llm';
      model: string;
      reason: string;
      durationMs: number;
      inputTokens?: number;
      outputTokens?: number;
      toolCalls: number;
      error?: string;
    }
  | { kind: 'tool'; name: string; arguments: string; result: string; isError: boolean; durationMs: number };

export interface TurnTrace {
  id: string;
  startedAt: number;
  endedAt: number;
  outcome: string;
  reply: string;
  steps: TraceStep[];
}
