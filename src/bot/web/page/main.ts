import {
  addChannel,
  labelEphemeral,
  loadChannels,
  loadThread,
  renderChannels,
  renderThread,
  restoreLocation,
  sendMessage,
  state,
  toggleDirectMessage,
  userName,
} from './chat.js';
import { byId } from './dom.js';
import { closeRun, currentRunId, openRun, refreshRun } from './run-page.js';
import { loadRuns } from './runs-panel.js';

/** The playground page's entry point: wires the DOM, restores the location and listens for live events. */

const pending: Record<string, boolean> = {};

/** Events arrive in bursts (a reply, a card, an edit); coalesce reloads. */
function schedule(kind: string, action: () => unknown): void {
  if (pending[kind]) return;
  pending[kind] = true;
  setTimeout(() => {
    pending[kind] = false;
    action();
  }, 40);
}

interface StoreEvent {
  kind?: string;
  channel?: string;
  threadId?: string;
}

function connectEvents(): void {
  const status = byId('connection');
  const source = new EventSource('/api/events');
  let wasDown = false;
  source.onopen = () => {
    status.textContent = 'live';
    status.className = 'status live';
    // After a reconnect, events may have been missed: reload what is on screen.
    if (wasDown) {
      void loadChannels();
      void loadThread();
      void loadRuns();
    }
    wasDown = false;
  };
  source.onerror = () => {
    status.textContent = 'reconnecting…';
    status.className = 'status';
    wasDown = true;
  };
  source.onmessage = (message: MessageEvent<string>) => {
    let event: StoreEvent;
    try {
      event = JSON.parse(message.data) as StoreEvent;
    } catch {
      return;
    }
    if (event.kind === 'runs') {
      schedule('runs', loadRuns);
      if (currentRunId() !== undefined) schedule('run', refreshRun);
      return;
    }
    if (event.channel === state.channel && event.threadId === state.thread) schedule('thread', loadThread);
    schedule('channels', loadChannels);
  };
}

const USER_KEY = 'shepherd-playground-user';
const nameInput = byId<HTMLInputElement>('user-name');
try {
  nameInput.value = localStorage.getItem(USER_KEY) || nameInput.value;
} catch {
  // storage may be off
}
nameInput.addEventListener('input', () => {
  try {
    localStorage.setItem(USER_KEY, userName());
  } catch {
    // storage may be off
  }
  labelEphemeral();
});
byId('composer').addEventListener('submit', (event) => void sendMessage(event));
byId('composer-text').addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey) {
    event.preventDefault();
    byId<HTMLFormElement>('composer').requestSubmit();
  }
});
byId('new-channel').addEventListener('submit', (event) => void addChannel(event));
byId('dm-toggle').addEventListener('click', toggleDirectMessage);
/** `#run/<id>` shows a run's page in place of the chat; any other hash is a channel or thread. */
function route(): void {
  const match = /^#run\/(.+)$/.exec(location.hash);
  const runId = match?.[1] === undefined ? undefined : decodeURIComponent(match[1]);
  byId('chat-view').hidden = runId !== undefined;
  byId('run-view').hidden = runId === undefined;
  if (runId !== undefined) {
    openRun(runId);
    return;
  }
  closeRun();
  restoreLocation();
  renderChannels();
  void loadThread();
}

window.addEventListener('hashchange', route);
renderChannels();
renderThread();
route();
connectEvents();
void loadChannels();
void loadRuns();
