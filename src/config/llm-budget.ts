import { z } from 'zod';

/**
 * The LLM budget's variables. `SHEPHERD_LLM_PRICES`: what a model's tokens cost, as `model=in_usd_per_mtok/out_usd_per_mtok,…`
 * (dollars per million input and output tokens). Entries given replace the defaults of the same name;
 * the rest of the defaults stay. A model is priced by its exact name, else by the longest listed name
 * it starts with (`claude-sonnet-4-20250514` uses `claude-sonnet-4`); an unlisted model costs nothing
 * (a local model), and its tokens are still counted.
 */

export interface LlmPrice {
  inputUsdPerMtok: number;
  outputUsdPerMtok: number;
}

/** List prices of common hosted models (USD per million tokens), as published by their vendors. */
const DEFAULT_LLM_PRICES: Readonly<Record<string, LlmPrice>> = {
  'gpt-4o': { inputUsdPerMtok: 2.5, outputUsdPerMtok: 10 },
  'gpt-4o-mini': { inputUsdPerMtok: 0.15, outputUsdPerMtok: 0.6 },
  'gpt-4.1': { inputUsdPerMtok: 2, outputUsdPerMtok: 8 },
  'gpt-4.1-mini': { inputUsdPerMtok: 0.4, outputUsdPerMtok: 1.6 },
  'gpt-4.1-nano': { inputUsdPerMtok: 0.1, outputUsdPerMtok: 0.4 },
  'gpt-5': { inputUsdPerMtok: 1.25, outputUsdPerMtok: 10 },
  'gpt-5-mini': { inputUsdPerMtok: 0.25, outputUsdPerMtok: 2 },
  o3: { inputUsdPerMtok: 2, outputUsdPerMtok: 8 },
  'o4-mini': { inputUsdPerMtok: 1.1, outputUsdPerMtok: 4.4 },
  'claude-opus-4': { inputUsdPerMtok: 15, outputUsdPerMtok: 75 },
  'claude-sonnet-4': { inputUsdPerMtok: 3, outputUsdPerMtok: 15 },
  'claude-3-7-sonnet': { inputUsdPerMtok: 3, outputUsdPerMtok: 15 },
  'claude-3-5-haiku': { inputUsdPerMtok: 0.8, outputUsdPerMtok: 4 },
  'claude-haiku-4-5': { inputUsdPerMtok: 1, outputUsdPerMtok: 5 },
};

const ENTRY = /^([^=\s]+)=(\d+(?:\.\d+)?)\/(\d+(?:\.\d+)?)$/;

/** Parses the variable on top of the defaults; throws an `Error` naming the bad entry. */
export function parseLlmPrices(value: string | undefined): Record<string, LlmPrice> {
  const prices: Record<string, LlmPrice> = { ...DEFAULT_LLM_PRICES };
  for (const raw of (value ?? '').split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const match = ENTRY.exec(entry);
    if (match === null)
      throw new Error(`"${entry}" is not model=in_usd_per_mtok/out_usd_per_mtok (e.g. gpt-4o=2.5/10)`);
    prices[match[1] as string] = { inputUsdPerMtok: Number(match[2]), outputUsdPerMtok: Number(match[3]) };
  }
  return prices;
}

/** The price of `model`: its exact entry, else the longest entry it starts with, else undefined. */
export function priceOf(prices: Readonly<Record<string, LlmPrice>>, model: string): LlmPrice | undefined {
  const exact = prices[model];
  if (exact !== undefined) return exact;
  let best: string | undefined;
  for (const name of Object.keys(prices)) {
    if (model.startsWith(name) && (best === undefined || name.length > best.length)) best = name;
  }
  return best === undefined ? undefined : prices[best];
}

/** The variables of the LLM budget, spread into the config's environment schema. */
export const llmBudgetEnvironment = {
  SHEPHERD_LLM_PRICES: z
    .string()
    .optional()
    .transform((value, context) => {
      try {
        return parseLlmPrices(value);
      } catch (error) {
        context.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    }),
  SHEPHERD_LLM_BUDGET_USD_THREAD: z.coerce.number().positive().default(5),
  SHEPHERD_LLM_BUDGET_USD_PERSON_DAY: z.coerce.number().positive().optional(),
};

/** $/Mtok in and out by model; the thread cap (raised by `budget +N`); the optional daily cap. */
export function llmBudgetSettings(environment: {
  SHEPHERD_LLM_PRICES: Record<string, LlmPrice>;
  SHEPHERD_LLM_BUDGET_USD_THREAD: number;
  SHEPHERD_LLM_BUDGET_USD_PERSON_DAY?: number | undefined;
}) {
  return {
    prices: environment.SHEPHERD_LLM_PRICES,
    budgetUsdThread: environment.SHEPHERD_LLM_BUDGET_USD_THREAD,
    budgetUsdPersonDay: environment.SHEPHERD_LLM_BUDGET_USD_PERSON_DAY,
  };
}
