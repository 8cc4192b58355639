import { createHash } from 'node:crypto';
import type { PageAssets } from './page-assets.js';

function cspHash(source: string): string {
  return `'sha256-${createHash('sha256').update(source, 'utf8').digest('base64')}'`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

/**
 * The playground page, built once at start. The inline script and style are allowed by hash in the
 * Content-Security-Policy, so nothing else (no injected markup, no external asset) can run or load.
 */
export function renderPage(
  options: { botName: string; extensions?: readonly string[] },
  assets: PageAssets,
): { html: string; contentSecurityPolicy: string } {
  // `</script` inside the bundle would end the element early; esbuild escapes it, this keeps it so.
  const script = assets.script.replace(/<\/(script)/gi, '<\\/$1');
  const style = assets.style.replace(/<\/(style)/gi, '<\\/$1');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shepherd playground</title>
<style>${style}</style>
</head>
<body data-bot-name="${escapeHtml(options.botName)}" data-extensions="${escapeHtml((options.extensions ?? []).join(' '))}">
<header class="top">
  <div class="brand">Shepherd <span>playground · mention @${escapeHtml(options.botName)}</span></div>
  <label class="who">You are <input id="user-name" value="alice" autocomplete="off" maxlength="80" aria-label="your user name" list="recent-users" data-testid="who-am-i"></label>
  <datalist id="recent-users"></datalist>
  <button id="dm-toggle" type="button" class="action dm-toggle" aria-pressed="false" data-testid="dm-toggle">DM @${escapeHtml(options.botName)}</button>
  <span id="connection" class="status">connecting…</span>
</header>
<div class="layout">
  <nav class="sidebar" aria-label="channels">
    <form id="new-channel" class="new-channel">
      <input id="new-channel-name" placeholder="new channel" maxlength="80" aria-label="new channel name">
      <button type="submit" class="action">Add</button>
    </form>
    <section id="runs-panel" class="runs-panel" data-testid="runs-panel" aria-label="runs">
      <h2>Runs</h2>
      <div id="runs"></div>
    </section>
    <h2 class="side-title">Channels</h2>
    <div id="channels"></div>
  </nav>
  <main class="main">
    <div id="run-view" class="run-view" hidden></div>
    <div id="chat-view" class="chat-view">
    <div id="thread-head" class="thread-head"></div>
    <div id="messages" class="messages" aria-live="polite"></div>
    <form id="composer" class="composer">
      <textarea id="composer-text" rows="2" aria-label="message"></textarea>
      <button type="submit" class="send">Send</button>
    </form>
    <div id="composer-error" class="error" role="alert"></div>
    </div>
  </main>
</div>
<script>${script}</script>
</body>
</html>
`;
  const contentSecurityPolicy = [
    "default-src 'none'",
    `script-src ${cspHash(script)}`,
    `style-src ${cspHash(style)}`,
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { html, contentSecurityPolicy };
}
