import { closeCardForm, openCardForm, openFormOf, type PageCardForm, refilled } from './card-form.js';
import { api, byId, formatTime, hasExtension, isFileUrl, make } from './dom.js';
import { fencedText, renderMarkdown } from './markdown.js';
import { placeTraces, renderTrace } from './trace.js';
import type { CardAction, ChannelSummary, Message, TurnTrace } from './types.js';

/** Channels, threads, messages and cards: the chat half of the playground. */

const BOT_USER = 'shepherd';
const BOT_NAME = document.body.dataset.botName || BOT_USER;

interface CardNote {
  kind: 'ok' | 'error';
  text: string;
}

export const state = {
  channels: [] as ChannelSummary[],
  extraChannels: ['general'],
  channel: 'general',
  thread: null as string | null,
  messages: [] as Message[],
  turns: [] as TurnTrace[],
  cardNotes: {} as Record<string, CardNote>,
};
let threadLoadSeq = 0;

export function userName(): string {
  return byId<HTMLInputElement>('user-name').value.trim() || 'alice';
}

/** DM mode's channels (see web-http.ts): no mention needed, one session per channel. */
const DM_PREFIX = 'dm.';
const isDirectMessage = (channel: string) => channel.startsWith(DM_PREFIX);

/** The DM channel of a person: their name reduced to what channel names allow. */
function dmChannelFor(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 80 - DM_PREFIX.length);
  return `${DM_PREFIX}${slug || 'someone'}`;
}

/** DM mode on: the current person's conversation with the bot (its one thread, once it has one). Off: back to #general. */
export function toggleDirectMessage(): void {
  if (isDirectMessage(state.channel)) {
    selectChannel('general');
    return;
  }
  const channel = dmChannelFor(userName());
  if (!state.extraChannels.includes(channel)) state.extraChannels.push(channel);
  const thread = state.channels.find((item) => item.channel === channel)?.threads[0]?.threadId;
  if (thread === undefined) selectChannel(channel);
  else selectThread(channel, thread);
}

function saveLocation(): void {
  const hash = `#${encodeURIComponent(state.channel)}${state.thread ? `/${encodeURIComponent(state.thread)}` : ''}`;
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

export function restoreLocation(): void {
  const parts = location.hash.replace(/^#/, '').split('/');
  if (parts[0] === 'run') return;
  if (parts[0]) {
    state.channel = decodeURIComponent(parts[0]);
    if (!state.extraChannels.includes(state.channel)) state.extraChannels.push(state.channel);
  }
  if (parts[1]) state.thread = decodeURIComponent(parts[1]);
}

function selectChannel(channel: string): void {
  state.channel = channel;
  state.thread = null;
  state.messages = [];
  saveLocation();
  renderChannels();
  renderThread();
  byId('composer-text').focus();
}

function selectThread(channel: string, thread: string): void {
  state.channel = channel;
  state.thread = thread;
  state.messages = [];
  saveLocation();
  renderChannels();
  renderThread();
  void loadThread();
}

export async function loadChannels(): Promise<void> {
  const result = await api<{ channels: ChannelSummary[] }>('GET', '/api/channels');
  if (!result.ok || !Array.isArray(result.data.channels)) return;
  state.channels = result.data.channels;
  renderChannels();
  renderRecentUsers();
}

export async function loadThread(): Promise<void> {
  if (!state.thread) {
    renderThread();
    return;
  }
  const seq = ++threadLoadSeq;
  const base = `/api/threads/${encodeURIComponent(state.thread)}`;
  const [result, turns] = await Promise.all([
    api<{ messages: Message[] }>('GET', `${base}/messages`),
    hasExtension('turns') ? api<{ turns: TurnTrace[] }>('GET', `${base}/turns`) : undefined,
  ]);
  if (seq !== threadLoadSeq) return;
  state.turns = turns?.ok && Array.isArray(turns.data.turns) ? turns.data.turns : [];
  if (!result.ok) {
    state.messages = [];
    renderThread(result.data.error || 'could not load the thread');
    return;
  }
  state.messages = result.data.messages ?? [];
  renderThread();
  renderRecentUsers();
}

export function renderChannels(): void {
  const box = byId('channels');
  box.replaceChildren();
  const names = state.channels.map((item) => item.channel);
  for (const name of state.extraChannels) if (!names.includes(name)) names.push(name);
  for (const name of names) {
    const summary = state.channels.find((item) => item.channel === name);
    const section = make('section', 'channel');
    const active = name === state.channel && !state.thread ? ' active' : '';
    const header = make('button', `channel-name${active}`, `# ${name}`);
    header.type = 'button';
    header.dataset.channel = name;
    header.addEventListener('click', () => selectChannel(name));
    section.append(header);
    const list = make('ul', 'threads');
    const threads = summary ? summary.threads : [];
    if (threads.length === 0) list.append(make('li', 'empty', 'no threads yet'));
    for (const thread of threads) {
      const item = make('li');
      const current = name === state.channel && thread.threadId === state.thread ? ' active' : '';
      const link = make('button', `thread-link${current}`);
      link.type = 'button';
      link.dataset.threadId = thread.threadId;
      link.append(make('span', 'preview', thread.preview || '(no text)'));
      link.append(make('span', 'info', `${thread.user} · ${formatTime(thread.lastActivity)}`));
      link.addEventListener('click', () => selectThread(name, thread.threadId));
      item.append(link);
      list.append(item);
    }
    section.append(list);
    box.append(section);
  }
}

export function renderThread(errorText?: string): void {
  const head = byId('thread-head');
  const direct = isDirectMessage(state.channel);
  byId('dm-toggle').setAttribute('aria-pressed', String(direct));
  head.replaceChildren(make('span', null, direct ? `DM with @${BOT_NAME}` : `# ${state.channel}`));
  head.append(
    make(
      'span',
      'sub',
      direct ? 'one session, no mention needed' : state.thread ? `thread ${state.thread}` : 'new thread',
    ),
  );
  if (state.thread) {
    // The thread's session command, as a button: the agent forgets the thread's history, runs stay.
    const reset = make('button', 'action reset', 'Reset session');
    reset.type = 'button';
    reset.dataset.testid = 'session-reset';
    reset.title = `posts "@${BOT_NAME} reset" in this thread`;
    reset.addEventListener('click', () => void postInThread(`@${BOT_NAME} reset`));
    head.append(reset);
  }
  byId<HTMLTextAreaElement>('composer-text').placeholder = direct
    ? `Message @${BOT_NAME}`
    : state.thread
      ? 'Reply in the thread'
      : `Start a thread in #${state.channel} (mention @${BOT_NAME} to ask Shepherd)`;
  const box = byId('messages');
  const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  box.replaceChildren();
  if (errorText) {
    box.append(make('p', 'hint error', errorText));
    return;
  }
  if (!state.thread) {
    box.append(
      make(
        'p',
        'hint',
        direct
          ? `Write to @${BOT_NAME}: everything here is one conversation.`
          : `Pick a thread on the left, or write a message below to start one. Mention @${BOT_NAME} and Shepherd joins the thread.`,
      ),
    );
    return;
  }
  const traces = placeTraces(state.messages, state.turns, BOT_USER);
  for (const message of state.messages) {
    const item = renderMessage(message);
    const trace = traces.get(message.id);
    if (trace !== undefined) item.append(renderTrace(trace));
    box.append(item);
  }
  labelEphemeral();
  if (nearBottom) box.scrollTop = box.scrollHeight;
}

function renderMessage(message: Message): HTMLElement {
  const isBot = message.user === BOT_USER;
  const item = make('article', `message${isBot ? ' bot' : ''}${message.visibleTo ? ' ephemeral' : ''}`);
  item.dataset.messageId = message.id;
  const meta = make('div', 'meta');
  meta.append(make('span', 'author', message.user), make('time', 'time', formatTime(message.ts)));
  if (message.editedAt) meta.append(make('span', 'edited', '(edited)'));
  if (message.visibleTo) {
    const only = make('span', 'only');
    only.dataset.visibleTo = message.visibleTo;
    meta.append(only);
  }
  item.append(meta);
  // The bot writes Markdown; people's messages are shown as typed.
  if (message.text) {
    item.append(isBot ? renderMarkdown('text', message.text) : fencedText('text plain', message.text));
  }
  if (message.card) item.append(renderCard(message));
  for (const url of message.images ?? []) {
    if (!isFileUrl(url)) continue;
    const image = make('img', 'inline-image');
    image.src = url;
    image.alt = 'image';
    item.append(image);
  }
  for (const file of message.files ?? []) {
    if (!isFileUrl(file.url)) continue;
    const link = make('a', 'file', `📎 ${file.name}`);
    link.href = file.url;
    link.download = file.name;
    item.append(link);
  }
  return item;
}

/** Relabel in place (no re-render): a re-render while a button is being clicked would swallow the click. */
export function labelEphemeral(): void {
  const me = userName();
  for (const node of document.querySelectorAll<HTMLElement>('.only')) {
    const target = node.dataset.visibleTo;
    node.textContent = target === me ? 'only visible to you' : `only visible to ${target}`;
  }
}

function renderCard(message: Message): HTMLElement {
  const card = message.card ?? {};
  const box = make('section', `card${card.resolved ? ' resolved' : ''}`);
  if (card.title) box.append(make('h3', null, card.title));
  // Fields first: who asked, GPUs and cost read at a glance; the script or traceback follows.
  if (card.fields?.length) {
    const list = make('dl');
    for (const field of card.fields)
      list.append(make('dt', null, field.label), make('dd', null, field.value));
    box.append(list);
  }
  if (card.text) box.append(fencedText('card-text', card.text));
  if (card.attachment) {
    // The whole file behind a cut excerpt, folded; text only (textContent), like everything else.
    const details = make('details', 'card-attachment');
    details.append(make('summary', null, `Show all of ${card.attachment.filename}`));
    details.append(make('pre', 'code', card.attachment.text));
    box.append(details);
  }
  if (card.imageUrl && isFileUrl(card.imageUrl)) {
    const image = make('img');
    image.src = card.imageUrl;
    image.alt = card.title || 'card image';
    box.append(image);
  }
  const form = card.resolved ? undefined : openFormOf(message.id);
  if (card.resolved) {
    box.append(make('div', 'outcome', `✓ ${card.resolved}`));
    delete state.cardNotes[message.id];
    closeCardForm(message.id);
  } else if (form !== undefined) box.append(form);
  else if (card.actions?.length) {
    const row = make('div', 'actions');
    for (const action of card.actions) {
      const button = make('button', `action ${action.style || 'default'}`, action.label);
      button.type = 'button';
      button.dataset.actionId = action.actionId;
      button.addEventListener('click', () => void clickAction(message, action, row));
      row.append(button);
    }
    box.append(row);
  }
  const note = state.cardNotes[message.id];
  if (note) box.append(make('div', `card-note ${note.kind}`, note.text));
  return box;
}

async function clickAction(
  message: Message,
  action: CardAction,
  row: HTMLElement | undefined,
  values?: Record<string, string>,
  sentFrom?: PageCardForm,
): Promise<void> {
  for (const button of row?.querySelectorAll('button') ?? []) button.disabled = true;
  // A button may open a form first (a reject reason, an edit); its values come back with the action.
  const result = await api<{ form: PageCardForm }>('POST', '/api/actions', {
    threadId: message.threadId || state.thread,
    messageId: message.id,
    actionId: action.actionId,
    user: userName(),
    ...(values === undefined ? { openForm: true } : { values }),
  });
  // A form whose values the server could not use (422) opens again with them, under the error.
  const form = result.ok ? result.data.form : result.status === 422 ? refilled(sentFrom, values) : undefined;
  if (form !== undefined) {
    openCardForm(message.id, form, (sent) => void clickAction(message, action, undefined, sent, form));
    if (result.ok) return renderThread();
  }
  state.cardNotes[message.id] = result.ok
    ? { kind: 'ok', text: result.data.message || 'Sent.' }
    : { kind: 'error', text: result.data.error || `failed (${result.status})` };
  renderThread();
}

async function postInThread(text: string): Promise<void> {
  if (!state.thread) return;
  const result = await api('POST', '/api/messages', {
    channel: state.channel,
    threadId: state.thread,
    user: userName(),
    text,
  });
  byId('composer-error').textContent = result.ok ? '' : result.data.error || `failed (${result.status})`;
  void loadThread();
}

/** "Who am I": the people seen recently (thread starters, authors on screen), offered on the name field. */
function renderRecentUsers(): void {
  const names = new Set<string>();
  for (const message of state.messages) if (message.user !== BOT_USER) names.add(message.user);
  for (const channel of state.channels) for (const thread of channel.threads) names.add(thread.user);
  const list = byId('recent-users');
  list.replaceChildren(
    ...[...names]
      .sort()
      .slice(0, 30)
      .map((name) => {
        const option = make('option');
        option.value = name;
        return option;
      }),
  );
}

export async function sendMessage(event: Event): Promise<void> {
  event.preventDefault();
  const input = byId<HTMLTextAreaElement>('composer-text');
  const text = input.value.trim();
  const errorBox = byId('composer-error');
  if (!text) return;
  const body: Record<string, string> = { channel: state.channel, user: userName(), text };
  if (state.thread) body.threadId = state.thread;
  const result = await api<{ threadId: string }>('POST', '/api/messages', body);
  if (!result.ok) {
    errorBox.textContent = result.data.error || `failed (${result.status})`;
    return;
  }
  errorBox.textContent = '';
  input.value = '';
  if (!state.thread && result.data.threadId) selectThread(state.channel, result.data.threadId);
  else void loadThread();
  void loadChannels();
}

export async function addChannel(event: Event): Promise<void> {
  event.preventDefault();
  const input = byId<HTMLInputElement>('new-channel-name');
  const name = input.value.trim().replace(/^#/, '');
  if (!name) return;
  const result = await api('POST', '/api/channels', { channel: name });
  if (!result.ok) {
    byId('composer-error').textContent = result.data.error || 'could not add the channel';
    return;
  }
  input.value = '';
  if (!state.extraChannels.includes(name)) state.extraChannels.push(name);
  selectChannel(name);
  void loadChannels();
}
