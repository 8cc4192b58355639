import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDatasetViewer,
  createInspectDatasetTool,
  describeFeatureType,
} from '../../src/tools/dataset-viewer.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import { type FakeHubServer, startFakeHub } from '../helpers/fake-hub-server.js';

/* inspect_dataset against a local fake of the dataset viewer API (/splits, /info, /first-rows). */

let hub: FakeHubServer;
beforeAll(async () => {
  hub = await startFakeHub();
});
afterAll(async () => {
  await hub.close();
});

const context = { threadId: 'web:c:t', actor: { id: 'u1', name: 'alice' } };

function registry(token?: string) {
  const viewer = createDatasetViewer({ baseUrl: hub.url, token, timeoutMs: 2000 });
  return createToolRegistry([createInspectDatasetTool(viewer, { hasToken: token !== undefined })]);
}

const call = (token: string | undefined, args: Record<string, unknown>) =>
  registry(token).execute({ id: 'c1', name: 'inspect_dataset', arguments: JSON.stringify(args) }, context);

describe('inspect_dataset', () => {
  it('shows configs, splits with row counts, typed features and the first rows, long cells cut', async () => {
    hub.requests.length = 0;
    const result = await call('hf_viewer_token_1234567890', { dataset: 'openai/gsm8k' });
    expect(result.isError).toBe(false);
    const lines = result.content.split('\n');
    expect(lines[0]).toBe('openai/gsm8k — config main (configs: main, socratic)');
    expect(lines[1]).toBe('splits: train (7,473 rows), test (1,319 rows)');
    expect(result.content).toContain('• question: string\n• answer: string');
    expect(result.content).toContain('first 3 rows of train:');
    expect(result.content).toMatch(/\[0\] question: Natalia sold clips.*… \(\d+ chars\) \| answer: #### 0/);
    expect(result.content).toContain('[2] question: Question 2 of train | answer: #### 14');
    expect(result.content).not.toContain('[3]');
    expect(result.content).toContain('(More: rows up to 20');
    expect(hub.requests.map((request) => request.path)).toEqual(['/splits', '/info', '/first-rows']);
    expect(hub.requests[2]?.query.get('config')).toBe('main');
    expect(hub.requests[2]?.query.get('split')).toBe('train');
    expect(
      hub.requests.every((request) => request.authorization === 'Bearer hf_viewer_token_1234567890'),
    ).toBe(true);
  });

  it('honours config, split and rows, and names what exists when asked for what does not', async () => {
    const result = await call(undefined, {
      dataset: 'openai/gsm8k',
      config: 'socratic',
      split: 'test',
      rows: 5,
    });
    expect(result.content).toContain('config socratic');
    expect(result.content).toContain('first 5 rows of test:');
    expect(result.content).toContain('[4] question: Question 4 of test');
    const wrong = await call(undefined, { dataset: 'openai/gsm8k', split: 'validation' });
    expect(wrong.content).toBe('openai/gsm8k (config main) has no split "validation". Splits: train, test.');
    const wrongConfig = await call(undefined, { dataset: 'openai/gsm8k', config: 'nope' });
    expect(wrongConfig.content).toBe('openai/gsm8k has no config "nope". Configs: main, socratic.');
  });

  it('explains a missing, private or gated dataset plainly', async () => {
    const missing = await call(undefined, { dataset: 'nobody/nothing' });
    expect(missing.isError).toBe(true);
    expect(missing.content).toContain(
      'nobody/nothing does not exist, or it is private or gated and Shepherd has no Hub token (SHEPHERD_HUB_TOKEN)',
    );
    expect(missing.content).toContain('search_datasets');
    const gated = await call('hf_viewer_token_1234567890', { dataset: 'someone/gated-accepted-needed' });
    expect(gated.content).toContain(
      'someone/gated-accepted-needed is gated: its owners ask users to accept their terms',
    );
    expect(gated.content).toContain('has not been granted access yet');
  });

  it('refuses an id that could steer the request, without a request', async () => {
    hub.requests.length = 0;
    const result = await call(undefined, { dataset: '../admin' });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/invalid arguments for inspect_dataset: dataset/);
    expect(hub.requests).toHaveLength(0);
  });

  it('an unreachable viewer is an error result', async () => {
    const viewer = createDatasetViewer({ baseUrl: 'http://127.0.0.1:1', timeoutMs: 2000 });
    const tools = createToolRegistry([createInspectDatasetTool(viewer, { hasToken: false })]);
    const result = await tools.execute(
      { id: 'c1', name: 'inspect_dataset', arguments: JSON.stringify({ dataset: 'openai/gsm8k' }) },
      context,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/cannot reach http:\/\/127\.0\.0\.1:1\/splits/);
  });
});

describe('describeFeatureType', () => {
  it('names the common feature types', () => {
    expect(describeFeatureType({ dtype: 'int64', _type: 'Value' })).toBe('int64');
    expect(describeFeatureType({ names: ['neg', 'pos'], _type: 'ClassLabel' })).toBe(
      'class label (neg, pos)',
    );
    expect(describeFeatureType({ feature: { dtype: 'string', _type: 'Value' }, _type: 'Sequence' })).toBe(
      'list<string>',
    );
    expect(
      describeFeatureType([
        { role: { dtype: 'string', _type: 'Value' }, content: { dtype: 'string', _type: 'Value' } },
      ]),
    ).toBe('list<{role: string, content: string}>');
    expect(describeFeatureType({ _type: 'Image' })).toBe('image');
  });
});
