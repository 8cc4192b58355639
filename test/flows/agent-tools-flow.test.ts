import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { type FakeHubServer, startFakeHub } from '../helpers/fake-hub-server.js';
import { cardsTitled } from '../helpers/flow.js';
import {
  type ScriptedLlmServer,
  type ScriptedToolCall,
  type Step,
  startScriptedOpenAi,
} from '../helpers/scripted-llm/index.js';
import { toolResults } from '../helpers/tool-results.js';
import { untilEvery } from '../helpers/until.js';

/*
 * The agent's run tools and "check before spending", black-box through the playground API with the
 * scripted OpenAI-compatible server, real runs (stdlib Python) and a local fake Hub / dataset viewer.
 * Tool results are read back from what the agent loop sent the model next.
 */

const CHECKPOINTS = 'test/fixtures/checkpoints_train.py';
const SYNTAX_ERROR = 'test/fixtures/syntax_error_train.py';

const until = untilEvery({ timeoutMs: 30_000, intervalMs: 100 });

const approveAction = (message: PlaygroundMessage | undefined) =>
  message?.card?.actions?.find((action) => action.label === 'Approve')?.actionId ?? '';

describe('agent run tools and checks before spending (playground)', () => {
  let llm: ScriptedLlmServer;
  let hub: FakeHubServer;
  let shepherd: TestApp;
  let threadId: string;
  let runId: string;
  /** The agent's scripted answers; the monitor's triage calls (NaN, crash) get their own answer. */
  const agentSteps: Step[] = [];

  /** One agent turn that makes `calls` and then answers `done`; returns each call's result. */
  async function agentCalls(calls: ScriptedToolCall[], message: string): Promise<string[]> {
    const stamp = `${Date.now()}${Math.random().toString(36).slice(2, 6)}`;
    const withIds = calls.map((call, index) => ({ ...call, id: `call_${stamp}_${index}` }));
    const answer = `done ${stamp}`;
    agentSteps.push({ toolCalls: withIds }, { text: answer });
    await shepherd.reply(threadId, `@shepherd ${message}`, 'alice');
    await shepherd.waitForMessages(threadId, (all) => botMessages(all).some((m) => m.text.includes(answer)));
    const results = toolResults(llm);
    return withIds.map((call) => results.get(call.id) ?? '(no result)');
  }

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    llm.setHandler((request) => {
      const body = JSON.stringify(request.body.messages);
      if (body.includes('ML training run doctor'))
        return { text: '{"decision": "WARNING", "diagnosis": "the fixture went NaN on purpose"}' };
      // A long thread is compacted in one call before the turn.
      if (body.includes('Conversation to summarise:'))
        return { text: 'Earlier: ckpt-a was read and patched.' };
      return agentSteps.shift() ?? { text: 'ok' };
    });
    hub = await startFakeHub();
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_GPUS: '2',
        SHEPHERD_HUB_URL: hub.url,
        SHEPHERD_DATASETS_SERVER_URL: hub.url,
        SHEPHERD_GPU_MEMORY_GB: '24',
      },
    });
    threadId = await shepherd.mention(`run ${CHECKPOINTS} --gpus 0 --name ckpt-a`, 'alice');
    const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'ckpt-a').length > 0);
    const card = cardsTitled(messages, 'ckpt-a')[0];
    expect((await shepherd.click(threadId, card?.id ?? '', approveAction(card), 'bob')).status).toBe(200);
    const meta = await until(async () => {
      const found = await shepherd.app.features.runs.find('ckpt-a');
      return found.status === 'failed' ? found : undefined;
    }, 'ckpt-a failed');
    runId = meta.id;
  }, 60_000);

  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    await hub.close();
  });

  it('read_run_file reads the script, the log tail, grep with context, metrics, config and meta — redacted', async () => {
    const [script, tail, grep, range = '', metrics, meta, config, unknown] = await agentCalls(
      [
        { name: 'read_run_file', arguments: { run: 'ckpt-a', file: 'train.py' } },
        { name: 'read_run_file', arguments: { run: 'ckpt-a', file: 'output.log' } },
        { name: 'read_run_file', arguments: { run: runId, file: 'output.log', grep: 'step 2[05] done' } },
        {
          name: 'read_run_file',
          arguments: { run: 'ckpt-a', file: 'train.py', start_line: 10, end_line: 12 },
        },
        { name: 'read_run_file', arguments: { run: 'ckpt-a', file: 'metrics' } },
        { name: 'read_run_file', arguments: { run: 'ckpt-a', file: 'meta' } },
        { name: 'read_run_file', arguments: { run: 'ckpt-a', file: 'config' } },
        { name: 'read_run_file', arguments: { run: 'ckpt-a', file: '/etc/passwd' } },
      ],
      'show me what ckpt-a did',
    );
    expect(script).toMatch(/^train\.py of ckpt-a:\n 1\| """Checkpoint fixture/);
    expect(script).toContain('13|     shepherd.log_metrics(step=step, loss=loss, lr=1e-3)');
    expect(script).toMatch(/\(lines 1–\d+ of \d+ in train\.py of ckpt-a; or grep to search\./);
    expect(script).toContain('train.py is v1; no archived versions.');

    // The log's tail, numbered; the token it printed never reaches the model.
    expect(tail).toMatch(/^output\.log of ckpt-a:\n/);
    expect(tail).toMatch(/\d+\| step 30 done/);
    expect(tail).toContain('hf_[REDACTED]');
    expect(tail).not.toContain('QQQQQQQQQQ');

    // grep: two matches, each with two lines of context either side, gaps marked.
    expect(grep).toMatch(/\d+\| step 20 done/);
    expect(grep).toMatch(/\d+\| step 25 done/);
    expect(grep).toMatch(/checkpoint saved at step 25: step25\.pt/);
    expect(grep).toContain('\n--\n');
    expect(grep).toMatch(
      /\(2 lines of output\.log of ckpt-a match \/step 2\[05\] done\/, \d+ lines in all\.\)$/,
    );

    expect(range.split('\n').slice(1, 4)).toEqual([
      '10| print("logged in with token hf_" + "Q" * 30, flush=True)',
      '11| for step in range(1, 31):',
      '12|     loss = 2.0 * math.exp(-step / 10) + 0.1 if step <= 20 else float("nan")',
    ]);
    expect(range).toMatch(/lines 10–12 of \d+ .*earlier: end_line=9, next: start_line=13/);

    expect(metrics).toContain('metrics of ckpt-a: 30 lines, steps 1–30');
    expect(metrics).toMatch(/• loss: 30 points, 1\.910 → NaN, min 0\.3707 @20, max 1\.910 @1, 10 NaN\/inf/);
    expect(meta).toContain(`"id": "${runId}"`);
    expect(meta).toContain('"status": "failed"');
    expect(config).toBe("ckpt-a has no config (start_training's config was not given).");
    expect(unknown).toMatch(/^Refused \(unknown_run_file\): "\/etc\/passwd" is not a run file/);
  });

  it('list_checkpoints gives step, path, time, loss and health (NaN episode marked)', async () => {
    // A checkpoint file removed since its save is flagged.
    rmSync(join(shepherd.dataDir, 'runs', runId, 'step30.pt'));
    const [list = ''] = await agentCalls(
      [{ name: 'list_checkpoints', arguments: { run: 'ckpt-a' } }],
      'checkpoints?',
    );
    const lines = list.split('\n');
    expect(lines[0]).toBe('6 checkpoints of ckpt-a:');
    expect(lines[1]).toMatch(
      /^• step 5 · step5\.pt · \d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d) · loss 1\.313 · healthy$/,
    );
    expect(lines[4]).toMatch(/^• step 20 · step20\.pt · .* · loss 0\.3707 · healthy$/);
    // NaN from step 21: from the curve, or from the monitor's incident mark when its alert came first.
    expect(lines[5]).toMatch(
      /^• step 25 · step25\.pt · .* · loss NaN · NOT healthy \((NaN loss|saved after the NaN at step 21)\)$/,
    );
    expect(lines[6]).toMatch(
      /^• step 30 · .* NOT healthy \((NaN loss|saved after the NaN at step 21)\) · file gone or overwritten since$/,
    );
  });

  it('edit_script refuses a missing and an ambiguous old with the candidates, then proposes a card that archives v1', async () => {
    const [missing, ambiguous, noCard] = await agentCalls(
      [
        {
          name: 'edit_script',
          arguments: {
            run: 'ckpt-a',
            edits: [{ old: 'shepherd.log_metrics(step=step, loss=loss, lr=1e-4)', new: 'x' }],
            reason: 'r',
          },
        },
        {
          name: 'edit_script',
          arguments: { run: 'ckpt-a', edits: [{ old: 'flush=True)', new: 'flush=False)' }], reason: 'r' },
        },
        {
          name: 'edit_script',
          arguments: {
            run: 'ckpt-a',
            edits: [{ old: 'if step <= 20 else', new: 'if step <= 20 (else' }],
            reason: 'r',
          },
        },
      ],
      'fix the learning rate',
    );
    expect(missing).toMatch(
      /^Refused \(edit_not_applied\): the edit: `old` does not occur in train\.py\. No change was proposed\./,
    );
    expect(missing).toContain('Closest lines');
    expect(missing).toContain('  line 13:     shepherd.log_metrics(step=step, loss=loss, lr=1e-3)');
    expect(ambiguous).toMatch(/`old` occurs 2 times in train\.py, at:\n {2}line 10: print\("logged in/);
    expect(ambiguous).toContain('  line 18:     print("step {} done".format(step), flush=True)');
    expect(ambiguous).toContain('Include more of the surrounding lines');
    // An edit that breaks the syntax is compiled first and gets no card; the thread is told the line.
    expect(noCard).toMatch(
      /^Refused \(script_syntax_error\): the change to ckpt-a was not proposed: train\.py does not compile \(line 12\)/,
    );
    let messages = await shepherd.messages(threadId);
    expect(cardsTitled(messages, 'Approve script change')).toHaveLength(0);
    expect(
      botMessages(messages).some((m) =>
        /^⚠️ the change to ckpt-a was not proposed: train\.py does not compile \(line 12\)/.test(m.text),
      ),
    ).toBe(true);

    const [proposed] = await agentCalls(
      [
        {
          name: 'edit_script',
          arguments: {
            run: 'ckpt-a',
            edits: [
              { old: 'lr=1e-3', new: 'lr=5e-4' },
              { old: 'if step <= 20 else float("nan")', new: '' },
            ],
            reason: 'lower the learning rate and drop the NaN',
          },
        },
      ],
      'lower the lr',
    );
    expect(proposed).toMatch(/^Script change for ckpt-a proposed \(approval /);
    expect(proposed).toContain('+    shepherd.log_metrics(step=step, loss=loss, lr=5e-4)');
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve script change: ckpt-a').length > 0,
    );
    const card = cardsTitled(messages, 'Approve script change: ckpt-a')[0];
    expect(card?.card?.text).toContain('Reason: lower the learning rate and drop the NaN');
    expect(card?.card?.text).toContain('-    shepherd.log_metrics(step=step, loss=loss, lr=1e-3)');
    expect((await shepherd.click(threadId, card?.id ?? '', approveAction(card), 'bob')).status).toBe(200);
    // The old version is copied to train_v1.py before train.py is replaced (run-store.ts): wait for the
    // new train.py, by which time the archive is there too (waiting for the archive raced the rewrite).
    const trainPy = join(shepherd.dataDir, 'runs', runId, 'train.py');
    await until(() => readFileSync(trainPy, 'utf8').includes('lr=5e-4'), 'train.py with lr=5e-4');
    expect(existsSync(join(shepherd.dataDir, 'runs', runId, 'train_v1.py'))).toBe(true);

    const [archived] = await agentCalls(
      [{ name: 'read_run_file', arguments: { run: 'ckpt-a', file: 'train_v1.py', grep: 'lr=' } }],
      'what was the old lr?',
    );
    expect(archived).toMatch(/13\| {5}shepherd\.log_metrics\(step=step, loss=loss, lr=1e-3\)/);
    expect(archived).toContain('train.py is v2; archived: train_v1.py.');
  });

  it('a script that does not compile gets no card: by command and from the agent, with its line number', async () => {
    const commandThread = await shepherd.mention(`run ${SYNTAX_ERROR} --gpus 1 --name broken`, 'alice');
    const messages = await shepherd.waitForMessages(commandThread, (all) =>
      botMessages(all).some((m) => m.text.includes('does not compile')),
    );
    const reply = botMessages(messages).find((m) => m.text.includes('does not compile'))?.text ?? '';
    expect(reply).toMatch(
      /^broken was not launched: train\.py does not compile \(line 4\): SyntaxError: '\(' was never closed/,
    );
    expect(reply).toContain('No approval card was posted.');
    expect(messages.some((m) => m.card !== undefined)).toBe(false);

    const script = readFileSync(SYNTAX_ERROR, 'utf8');
    const [result] = await agentCalls(
      [{ name: 'start_training', arguments: { name: 'broken-agent', script, gpus: 1 } }],
      'train it',
    );
    expect(result).toMatch(
      /^Refused \(script_syntax_error\): broken-agent was not launched: train\.py does not compile \(line 4\)/,
    );
    const thread = await shepherd.messages(threadId);
    expect(cardsTitled(thread, 'broken-agent')).toHaveLength(0);
    expect(botMessages(thread).some((m) => m.text.startsWith('⚠️ broken-agent was not launched'))).toBe(true);
    const runs = await shepherd.app.features.runs.list();
    expect(runs.map((run) => run.name)).not.toContain('broken-agent');
    expect(runs.map((run) => run.name)).not.toContain('broken');
  });

  it('inspect_dataset reads the fake dataset viewer', async () => {
    const [dataset, missing] = await agentCalls(
      [
        { name: 'inspect_dataset', arguments: { dataset: 'openai/gsm8k', rows: 2 } },
        { name: 'inspect_dataset', arguments: { dataset: 'nobody/private-set' } },
      ],
      'what is in gsm8k?',
    );
    expect(dataset).toContain('openai/gsm8k — config main (configs: main, socratic)');
    expect(dataset).toContain('splits: train (7,473 rows), test (1,319 rows)');
    expect(dataset).toContain('• question: string');
    expect(dataset).toContain('[1] question: Question 1 of train | answer: #### 7');
    expect(missing).toMatch(/^Error: nobody\/private-set does not exist, or it is private or gated/);
  });

  it('the hub tools answer through @huggingface/hub against the local hub', async () => {
    const [models = '', datasets, info] = await agentCalls(
      [
        { name: 'search_models', arguments: { query: 'qwen' } },
        { name: 'search_datasets', arguments: { query: 'gsm8k' } },
        { name: 'get_model_info', arguments: { model_id: 'meta-llama/Llama-2-7b-hf' } },
      ],
      'find a model and data',
    );
    expect(models.split('\n')).toEqual([
      '1 models matching "qwen", most downloaded first:',
      'Qwen/Qwen2.5-0.5B · 1K downloads · 10 likes · text-generation · 494M params · transformers',
    ]);
    expect(datasets).toContain('openai/gsm8k · 412.9K downloads · 622 likes · size 1K<n<10K');
    expect(info).toContain('parameters: 6.7B (6738415616) BF16');
    expect(
      hub.requests.some((request) => request.path === '/api/models/meta-llama/Llama-2-7b-hf/revision/HEAD'),
    ).toBe(true);
  });

  it('estimate_memory uses the hub parameter count, and the launch card shows the estimate', async () => {
    const [small, large] = await agentCalls(
      [
        {
          name: 'estimate_memory',
          arguments: { model: 'meta-llama/Llama-2-7b-hf', method: 'full', seq_len: 2048, batch_size: 4 },
        },
        {
          name: 'estimate_memory',
          arguments: { model: 'Qwen/Qwen2.5-0.5B', method: 'lora', seq_len: 1024, batch_size: 4 },
        },
      ],
      'will it fit?',
    );
    expect(small).toMatch(
      /^meta-llama\/Llama-2-7b-hf, full, 6\.74B parameters, seq_len 2048, batch 4 per GPU, 1 GPU:/,
    );
    expect(small).toContain('does NOT fit on a 24 GB GPU');
    expect(small).toMatch(/To fit: .*LoRA/);
    expect(large).toMatch(/^Qwen\/Qwen2\.5-0\.5B, lora, 0\.49B parameters/);
    expect(large).toContain('fits on a 24 GB GPU');

    const script = readFileSync('test/fixtures/healthy_train.py', 'utf8');
    agentSteps.push(
      {
        toolCalls: [
          {
            name: 'start_training',
            arguments: { name: 'qwen-lora', script, gpus: 1, max_hours: 1, model_id: 'Qwen/Qwen2.5-0.5B' },
          },
        ],
      },
      { text: 'card posted' },
    );
    await shepherd.reply(threadId, '@shepherd launch it', 'alice');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'qwen-lora').length > 0,
    );
    const card = cardsTitled(messages, 'qwen-lora')[0];
    const field = card?.card?.fields?.find((entry) => entry.label === 'Memory estimate');
    expect(field?.value).toMatch(/^≈ [\d.]+ GB\/GPU \([\d.]+ GB checkpointed\), lora, fits in 24 GB$/);
    await shepherd.click(threadId, card?.id ?? '', card?.card?.actions?.[1]?.actionId ?? '', 'alice');
    await until(async () => {
      const meta = await shepherd.app.features.runs.find('qwen-lora');
      return meta.status === 'rejected' || undefined;
    }, 'qwen-lora rejected');

    // A finished run's script can never be applied: refused before any card.
    const [late] = await agentCalls(
      [
        {
          name: 'edit_script',
          arguments: { run: 'qwen-lora', edits: [{ old: 'lr=1e-3', new: 'lr=1e-4' }], reason: 'r' },
        },
      ],
      'change it anyway',
    );
    expect(late).toBe('Error: run qwen-lora is rejected; start a new run instead');
    expect(cardsTitled(await shepherd.messages(threadId), 'Approve script change: qwen-lora')).toHaveLength(
      0,
    );
  });
});
