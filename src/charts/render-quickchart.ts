import { BotError } from '../errors.js';
import type { BuiltChart } from './chart-config.js';

/** Rendering by a QuickChart server (`POST {url}/chart`), the public one or a self-hosted instance. */

export class ChartRenderError extends BotError {
  readonly status: number | undefined;
  constructor(
    code: 'chart_http' | 'chart_network' | 'chart_not_png',
    message: string,
    options: { status?: number; cause?: unknown } = {},
  ) {
    super(code, message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ChartRenderError';
    this.status = options.status;
  }
}

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length > 8 && PNG_MAGIC.every((byte, index) => bytes[index] === byte);
}

export async function renderWithQuickChart(
  built: BuiltChart,
  options: { url: string; fetch?: typeof fetch; timeoutMs?: number },
): Promise<Uint8Array> {
  const fetchImpl = options.fetch ?? fetch;
  const endpoint = `${options.url.replace(/\/+$/, '')}/chart`;
  let response: Response;
  try {
    response = await fetchImpl(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(built.quickChart.getPostData()),
      signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
    });
  } catch (error) {
    throw new ChartRenderError('chart_network', `QuickChart at ${endpoint} unreachable`, { cause: error });
  }
  if (!response.ok) {
    const detail = (await response.text().catch(() => '')).slice(0, 200);
    throw new ChartRenderError('chart_http', `QuickChart answered ${response.status}: ${detail}`, {
      status: response.status,
    });
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (!isPng(bytes)) throw new ChartRenderError('chart_not_png', 'QuickChart did not return a PNG');
  return bytes;
}
