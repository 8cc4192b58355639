/*
 * The playground page's browser script: plain JavaScript, no build step, no external assets. All user
 * text goes through textContent, never innerHTML. (Written without template literals so it can live in
 * String.raw below.)
 */
export const PAGE_SCRIPT = String.raw`
'use strict';
(function () {
  var BOT_USER = 'shepherd';
  var BOT_NAME = document.body.dataset.botName || BOT_USER;
  var state = { channels: [], extraChannels: ['general'], channel: 'general', thread: null, messages: [], cardNotes: {} };
  var threadLoadSeq = 0;
  var pending = { channels: false, thread: false };

  function byId(id) { return document.getElementById(id); }
  function make(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function userName() {
    var value = byId('user-name').value.trim();
    return value || 'alice';
  }
  function formatTime(ts) {
    var date = new Date(ts);
    var time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    return date.toDateString() === new Date().toDateString() ? time : date.toLocaleDateString() + ' ' + time;
  }
  function isFileUrl(url) { return typeof url === 'string' && url.indexOf('/api/files/') === 0; }

  async function api(method, path, body) {
    var init = { method: method, headers: {} };
    if (body !== undefined) { init.headers['content-type'] = 'application/json'; init.body = JSON.stringify(body); }
    var response = await fetch(path, init);
    var data = {};
    try { data = await response.json(); } catch (error) { data = {}; }
    return { status: response.status, ok: response.ok, data: data };
  }

  function saveLocation() {
    var hash = '#' + encodeURIComponent(state.channel) + (state.thread ? '/' + encodeURIComponent(state.thread) : '');
    if (location.hash !== hash) history.replaceState(null, '', hash);
  }
  function restoreLocation() {
    var parts = location.hash.replace(/^#/, '').split('/');
    if (parts[0]) {
      state.channel = decodeURIComponent(parts[0]);
      if (state.extraChannels.indexOf(state.channel) < 0) state.extraChannels.push(state.channel);
    }
    if (parts[1]) state.thread = decodeURIComponent(parts[1]);
  }

  function selectChannel(channel) {
    state.channel = channel;
    state.thread = null;
    state.messages = [];
    saveLocation();
    renderChannels();
    renderThread();
    byId('composer-text').focus();
  }
  function selectThread(channel, thread) {
    state.channel = channel;
    state.thread = thread;
    state.messages = [];
    saveLocation();
    renderChannels();
    renderThread();
    loadThread();
  }

  async function loadChannels() {
    var result = await api('GET', '/api/channels');
    if (!result.ok || !Array.isArray(result.data.channels)) return;
    state.channels = result.data.channels;
    renderChannels();
  }
  async function loadThread() {
    if (!state.thread) { renderThread(); return; }
    var seq = ++threadLoadSeq;
    var result = await api('GET', '/api/threads/' + encodeURIComponent(state.thread) + '/messages');
    if (seq !== threadLoadSeq) return;
    if (!result.ok) {
      state.messages = [];
      renderThread(result.data.error || 'could not load the thread');
      return;
    }
    state.messages = result.data.messages || [];
    renderThread();
  }

  // Events arrive in bursts (a reply, a card, an edit); coalesce reloads.
  function schedule(kind, action) {
    if (pending[kind]) return;
    pending[kind] = true;
    setTimeout(function () { pending[kind] = false; action(); }, 40);
  }

  function renderChannels() {
    var box = byId('channels');
    box.replaceChildren();
    var names = state.channels.map(function (item) { return item.channel; });
    state.extraChannels.forEach(function (name) { if (names.indexOf(name) < 0) names.push(name); });
    names.forEach(function (name) {
      var summary = state.channels.find(function (item) { return item.channel === name; });
      var section = make('section', 'channel');
      var header = make('button', 'channel-name' + (name === state.channel && !state.thread ? ' active' : ''), '# ' + name);
      header.type = 'button';
      header.dataset.channel = name;
      header.addEventListener('click', function () { selectChannel(name); });
      section.append(header);
      var list = make('ul', 'threads');
      var threads = summary ? summary.threads : [];
      if (threads.length === 0) list.append(make('li', 'empty', 'no threads yet'));
      threads.forEach(function (thread) {
        var item = make('li');
        var link = make('button', 'thread-link' + (name === state.channel && thread.threadId === state.thread ? ' active' : ''));
        link.type = 'button';
        link.dataset.threadId = thread.threadId;
        link.append(make('span', 'preview', thread.preview || '(no text)'));
        link.append(make('span', 'info', thread.user + ' · ' + formatTime(thread.lastActivity)));
        link.addEventListener('click', function () { selectThread(name, thread.threadId); });
        item.append(link);
        list.append(item);
      });
      section.append(list);
      box.append(section);
    });
  }

  function renderThread(errorText) {
    var head = byId('thread-head');
    head.replaceChildren(make('span', null, '# ' + state.channel));
    head.append(make('span', 'sub', state.thread ? 'thread ' + state.thread : 'new thread'));
    byId('composer-text').placeholder = state.thread
      ? 'Reply in the thread'
      : 'Start a thread in #' + state.channel + ' (mention @' + BOT_NAME + ' to ask Shepherd)';
    var box = byId('messages');
    var nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    box.replaceChildren();
    if (errorText) { box.append(make('p', 'hint error', errorText)); return; }
    if (!state.thread) {
      box.append(make('p', 'hint', 'Pick a thread on the left, or write a message below to start one. Mention @' + BOT_NAME + ' and Shepherd joins the thread.'));
      return;
    }
    state.messages.forEach(function (message) { box.append(renderMessage(message)); });
    labelEphemeral();
    if (nearBottom) box.scrollTop = box.scrollHeight;
  }

  // Text with \`\`\` fences: plain parts keep their line breaks, fenced parts become <pre> blocks.
  function richText(className, text) {
    var box = make('div', className);
    var fence = String.fromCharCode(96, 96, 96);
    String(text).split(fence).forEach(function (part, index) {
      if (index % 2 === 1) {
        var block = make('pre', 'code');
        block.textContent = part.replace(/^[a-z]*\n/, '').replace(/\n$/, '');
        box.append(block);
      } else if (part.trim() !== '') {
        box.append(make('span', null, part.replace(/^\n+|\n+$/g, '')));
      }
    });
    return box;
  }

  function renderMessage(message) {
    var classes = 'message' + (message.user === BOT_USER ? ' bot' : '') + (message.visibleTo ? ' ephemeral' : '');
    var item = make('article', classes);
    item.dataset.messageId = message.id;
    var meta = make('div', 'meta');
    meta.append(make('span', 'author', message.user), make('time', 'time', formatTime(message.ts)));
    if (message.editedAt) meta.append(make('span', 'edited', '(edited)'));
    if (message.visibleTo) {
      var only = make('span', 'only');
      only.dataset.visibleTo = message.visibleTo;
      meta.append(only);
    }
    item.append(meta);
    if (message.text) item.append(richText('text', message.text));
    if (message.card) item.append(renderCard(message));
    (message.images || []).forEach(function (url) {
      if (!isFileUrl(url)) return;
      var image = make('img', 'inline-image');
      image.src = url;
      image.alt = 'image';
      item.append(image);
    });
    (message.files || []).forEach(function (file) {
      if (!isFileUrl(file.url)) return;
      var link = make('a', 'file', '📎 ' + file.name);
      link.href = file.url;
      link.download = file.name;
      item.append(link);
    });
    return item;
  }

  // Relabel in place (no re-render): a re-render while a button is being clicked would swallow the click.
  function labelEphemeral() {
    var me = userName();
    document.querySelectorAll('.only').forEach(function (node) {
      var target = node.dataset.visibleTo;
      node.textContent = target === me ? 'only visible to you' : 'only visible to ' + target;
    });
  }

  function renderCard(message) {
    var card = message.card;
    var box = make('section', 'card' + (card.resolved ? ' resolved' : ''));
    if (card.title) box.append(make('h3', null, card.title));
    // Fields first: who asked, GPUs and cost read at a glance; the script or traceback follows.
    if (card.fields && card.fields.length) {
      var list = make('dl');
      card.fields.forEach(function (field) { list.append(make('dt', null, field.label), make('dd', null, field.value)); });
      box.append(list);
    }
    if (card.text) box.append(richText('card-text', card.text));
    if (card.attachment) {
      // The whole file behind a cut excerpt, folded; text only (textContent), like everything else.
      var details = make('details', 'card-attachment');
      details.append(make('summary', null, 'Show all of ' + card.attachment.filename));
      details.append(make('pre', 'code', card.attachment.text));
      box.append(details);
    }
    if (card.imageUrl && isFileUrl(card.imageUrl)) {
      var image = make('img');
      image.src = card.imageUrl;
      image.alt = card.title || 'card image';
      box.append(image);
    }
    if (card.resolved) {
      box.append(make('div', 'outcome', '✓ ' + card.resolved));
      delete state.cardNotes[message.id];
    } else if (card.actions && card.actions.length) {
      var row = make('div', 'actions');
      card.actions.forEach(function (action) {
        var button = make('button', 'action ' + (action.style || 'default'), action.label);
        button.type = 'button';
        button.dataset.actionId = action.actionId;
        button.addEventListener('click', function () { clickAction(message, action, row); });
        row.append(button);
      });
      box.append(row);
    }
    var note = state.cardNotes[message.id];
    if (note) box.append(make('div', 'card-note ' + note.kind, note.text));
    return box;
  }

  async function clickAction(message, action, row) {
    row.querySelectorAll('button').forEach(function (button) { button.disabled = true; });
    var result = await api('POST', '/api/actions', {
      threadId: message.threadId || state.thread, messageId: message.id, actionId: action.actionId, user: userName(),
    });
    if (result.ok) {
      state.cardNotes[message.id] = { kind: 'ok', text: result.data.message || 'Sent.' };
    } else {
      state.cardNotes[message.id] = { kind: 'error', text: result.data.error || ('failed (' + result.status + ')') };
    }
    renderThread();
  }

  async function sendMessage(event) {
    event.preventDefault();
    var input = byId('composer-text');
    var text = input.value.trim();
    var errorBox = byId('composer-error');
    if (!text) return;
    var body = { channel: state.channel, user: userName(), text: text };
    if (state.thread) body.threadId = state.thread;
    var result = await api('POST', '/api/messages', body);
    if (!result.ok) { errorBox.textContent = result.data.error || ('failed (' + result.status + ')'); return; }
    errorBox.textContent = '';
    input.value = '';
    if (!state.thread) selectThread(state.channel, result.data.threadId);
    else loadThread();
    loadChannels();
  }

  async function addChannel(event) {
    event.preventDefault();
    var input = byId('new-channel-name');
    var name = input.value.trim().replace(/^#/, '');
    if (!name) return;
    var result = await api('POST', '/api/channels', { channel: name });
    if (!result.ok) { byId('composer-error').textContent = result.data.error || 'could not add the channel'; return; }
    input.value = '';
    if (state.extraChannels.indexOf(name) < 0) state.extraChannels.push(name);
    selectChannel(name);
    loadChannels();
  }

  function connectEvents() {
    var status = byId('connection');
    var source = new EventSource('/api/events');
    var wasDown = false;
    source.onopen = function () {
      status.textContent = 'live';
      status.className = 'status live';
      // After a reconnect, events may have been missed: reload what is on screen.
      if (wasDown) { loadChannels(); loadThread(); }
      wasDown = false;
    };
    source.onerror = function () {
      status.textContent = 'reconnecting…';
      status.className = 'status';
      wasDown = true;
    };
    source.onmessage = function (message) {
      var event;
      try { event = JSON.parse(message.data); } catch (error) { return; }
      if (event.channel === state.channel && event.threadId === state.thread) schedule('thread', loadThread);
      schedule('channels', loadChannels);
    };
  }

  var nameInput = byId('user-name');
  try { nameInput.value = localStorage.getItem('shepherd-playground-user') || nameInput.value; } catch (error) { /* storage may be off */ }
  nameInput.addEventListener('input', function () {
    try { localStorage.setItem('shepherd-playground-user', userName()); } catch (error) { /* storage may be off */ }
    labelEphemeral();
  });
  byId('composer').addEventListener('submit', sendMessage);
  byId('composer-text').addEventListener('keydown', function (event) {
    if (event.key === 'Enter' && !event.shiftKey) { event.preventDefault(); byId('composer').requestSubmit(); }
  });
  byId('new-channel').addEventListener('submit', addChannel);
  restoreLocation();
  renderChannels();
  renderThread();
  connectEvents();
  loadChannels();
  loadThread();
})();
`;
