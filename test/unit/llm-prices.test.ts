import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { parseLlmPrices, priceOf } from '../../src/config/llm-budget.js';
import { costOf } from '../../src/spend/llm-ledger.js';

describe('SHEPHERD_LLM_PRICES', () => {
  it('keeps the defaults, lets an entry replace one and add another', () => {
    const prices = parseLlmPrices('gpt-4o=5/20, local-qwen=0/0');
    expect(prices['gpt-4o']).toEqual({ inputUsdPerMtok: 5, outputUsdPerMtok: 20 });
    expect(prices['local-qwen']).toEqual({ inputUsdPerMtok: 0, outputUsdPerMtok: 0 });
    expect(prices['claude-sonnet-4']).toEqual({ inputUsdPerMtok: 3, outputUsdPerMtok: 15 });
  });

  it('prices a model by its exact name, else by the longest listed prefix, else not at all', () => {
    const prices = parseLlmPrices(undefined);
    expect(priceOf(prices, 'gpt-4o-mini')).toEqual({ inputUsdPerMtok: 0.15, outputUsdPerMtok: 0.6 });
    expect(priceOf(prices, 'gpt-4o-mini-2024-07-18')).toEqual(prices['gpt-4o-mini']);
    expect(priceOf(prices, 'claude-sonnet-4-20250514')).toEqual(prices['claude-sonnet-4']);
    expect(priceOf(prices, 'qwen3.5')).toBeUndefined();
  });

  it('costs a call in dollars per million tokens; an unpriced model costs nothing', () => {
    expect(costOf({ inputUsdPerMtok: 3, outputUsdPerMtok: 15 }, 1_000_000, 100_000)).toBeCloseTo(4.5, 10);
    expect(costOf(undefined, 5_000, 5_000)).toBe(0);
  });

  it('a malformed entry stops start-up with a message naming the variable and the entry', () => {
    expect(() => loadConfig({ SHEPHERD_LLM_PRICES: 'gpt-4o=2.5' })).toThrow(
      /SHEPHERD_LLM_PRICES=.*"gpt-4o=2\.5" is not model=in_usd_per_mtok\/out_usd_per_mtok/,
    );
    expect(() => loadConfig({ SHEPHERD_LLM_BUDGET_USD_THREAD: '0' })).toThrow(
      /SHEPHERD_LLM_BUDGET_USD_THREAD/,
    );
  });
});
