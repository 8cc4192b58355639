/** The playground page's stylesheet: neutral colours that follow the system's light or dark setting. */
// biome-ignore lint/complexity/noUselessStringRaw: a backslash added later must reach the browser as written
export const PAGE_STYLE = String.raw`
:root {
  color-scheme: light dark;
  --bg: #f6f7f9; --panel: #ffffff; --sidebar: #eef0f3; --text: #1d2127; --muted: #68707c;
  --border: #d9dde3; --accent: #2f6fdb; --accent-text: #ffffff; --danger: #c93c3c; --bot: #f0f4fb;
  --card: #fafbfc; --ephemeral: #fff8e1; --ok: #2e7d4f;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #16181c; --panel: #1d2025; --sidebar: #121417; --text: #e4e6ea; --muted: #9aa1ac;
    --border: #30343b; --accent: #5b8ff0; --accent-text: #0d1117; --danger: #ef6b6b; --bot: #1f2633;
    --card: #23272e; --ephemeral: #3a3320; --ok: #5cc489;
  }
}
* { box-sizing: border-box; }
html, body { height: 100%; margin: 0; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--text); display: flex; flex-direction: column; }
button, input, textarea { font: inherit; color: inherit; }
.top { display: flex; align-items: center; gap: 16px; padding: 10px 16px; border-bottom: 1px solid var(--border); background: var(--panel); }
.brand { font-weight: 700; font-size: 16px; }
.brand span { font-weight: 400; color: var(--muted); }
.who { margin-left: auto; color: var(--muted); display: flex; align-items: center; gap: 8px; }
.who input { width: 140px; }
.status { font-size: 12px; color: var(--muted); min-width: 90px; text-align: right; }
.status.live { color: var(--ok); }
input, textarea { background: var(--bg); border: 1px solid var(--border); border-radius: 6px; padding: 6px 8px; }
input:focus, textarea:focus { outline: 2px solid var(--accent); outline-offset: -1px; }
.layout { flex: 1; display: flex; min-height: 0; }
.sidebar { width: 280px; flex: none; background: var(--sidebar); border-right: 1px solid var(--border); overflow-y: auto; padding: 12px; }
.new-channel { display: flex; gap: 6px; margin-bottom: 12px; }
.new-channel input { flex: 1; min-width: 0; }
.channel { margin-bottom: 14px; }
.channel-name { display: block; width: 100%; text-align: left; background: none; border: 0; padding: 4px 6px; border-radius: 6px; font-weight: 600; cursor: pointer; }
.channel-name.active, .channel-name:hover { background: var(--border); }
.threads { list-style: none; margin: 2px 0 0; padding: 0 0 0 8px; }
.thread-link { display: block; width: 100%; text-align: left; background: none; border: 0; border-radius: 6px; padding: 5px 6px; cursor: pointer; }
.thread-link:hover { background: var(--border); }
.thread-link.active { background: var(--accent); color: var(--accent-text); }
.thread-link .preview { display: block; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.thread-link .info { display: block; font-size: 12px; opacity: 0.75; }
.empty { color: var(--muted); font-size: 13px; padding: 2px 6px; }
.main { flex: 1; display: flex; flex-direction: column; min-width: 0; background: var(--panel); }
.thread-head { padding: 10px 16px; border-bottom: 1px solid var(--border); font-weight: 600; }
.thread-head .sub { font-weight: 400; color: var(--muted); margin-left: 8px; }
.messages { flex: 1; overflow-y: auto; padding: 12px 16px; display: flex; flex-direction: column; gap: 10px; }
.hint { color: var(--muted); margin: auto; text-align: center; max-width: 420px; }
.message { padding: 8px 12px; border-radius: 8px; border: 1px solid transparent; max-width: 860px; }
.message.bot { background: var(--bot); }
.message.ephemeral { background: var(--ephemeral); border-style: dashed; border-color: var(--border); }
.meta { display: flex; gap: 8px; align-items: baseline; font-size: 12px; color: var(--muted); }
.author { font-weight: 700; font-size: 13px; color: var(--text); }
.only { font-style: italic; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin-top: 2px; }
pre.code { white-space: pre; overflow-x: auto; max-height: 22em; margin: 6px 0; padding: 8px 10px; border-radius: 6px; background: rgba(127, 127, 127, 0.12); font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.inline-image { display: block; max-width: min(100%, 640px); margin-top: 6px; border-radius: 6px; border: 1px solid var(--border); }
.file { display: inline-block; margin-top: 6px; color: var(--accent); }
.card { margin-top: 6px; border: 1px solid var(--border); border-left: 4px solid var(--accent); border-radius: 6px; background: var(--card); padding: 10px 12px; max-width: 640px; }
.card.resolved { border-left-color: var(--muted); }
.card h3 { margin: 0 0 4px; font-size: 15px; }
.card .card-text { white-space: pre-wrap; overflow-wrap: anywhere; }
.card .card-attachment summary { cursor: pointer; margin-top: 4px; }
.card dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 8px 0 0; }
.card dt { color: var(--muted); }
.card dd { margin: 0; overflow-wrap: anywhere; white-space: pre-wrap; }
.card img { display: block; max-width: 100%; margin-top: 8px; border-radius: 4px; }
.actions { display: flex; gap: 8px; margin-top: 10px; flex-wrap: wrap; }
.action { border: 1px solid var(--border); background: var(--panel); border-radius: 6px; padding: 5px 14px; cursor: pointer; font-weight: 600; }
.action.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-text); }
.action.danger { color: var(--danger); border-color: var(--danger); }
.action:disabled { opacity: 0.5; cursor: default; }
.outcome { margin-top: 8px; font-weight: 600; color: var(--muted); }
.card-note { margin-top: 6px; font-size: 13px; }
.card-note.error, .error { color: var(--danger); }
.composer { display: flex; gap: 8px; padding: 10px 16px; border-top: 1px solid var(--border); }
.composer textarea { flex: 1; resize: vertical; min-height: 40px; max-height: 240px; }
.send { background: var(--accent); color: var(--accent-text); border: 0; border-radius: 6px; padding: 0 18px; font-weight: 600; cursor: pointer; }
.error { padding: 0 16px 8px; min-height: 1em; font-size: 13px; }
`;
