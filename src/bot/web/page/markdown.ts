import DOMPurify from 'dompurify';
import MarkdownIt from 'markdown-it';
import { make } from './dom.js';

/**
 * The agent's Markdown: raw HTML off in the parser, then DOMPurify over the result as a second line, so
 * nothing in a message can execute. Images are off (a chat answer has no business loading URLs) and links
 * open in a new tab without an opener or referrer.
 */
const markdown = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false }).disable(
  'image',
);

const purifier = DOMPurify(window);
purifier.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

export function renderMarkdown(className: string, text: string): HTMLElement {
  const box = make('div', `${className} markdown`);
  const html = markdown.render(text);
  const fragment = purifier.sanitize(html, {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ['style', 'img', 'form', 'input', 'button', 'iframe'],
    FORBID_ATTR: ['style'],
  });
  box.append(fragment);
  return box;
}

/** Plain text with ``` fences: plain parts keep their line breaks, fenced parts become <pre> blocks. */
export function fencedText(className: string, text: string): HTMLElement {
  const box = make('div', className);
  String(text)
    .split('```')
    .forEach((part, index) => {
      if (index % 2 === 1) {
        box.append(make('pre', 'code', part.replace(/^[a-z]*\n/, '').replace(/\n$/, '')));
      } else if (part.trim() !== '') {
        box.append(make('span', null, part.replace(/^\n+|\n+$/g, '')));
      }
    });
  return box;
}
