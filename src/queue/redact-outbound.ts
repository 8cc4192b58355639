import { redactSecrets } from '../text/redact.js';
import type { CardPayload, NotifyJob } from './jobs.js';

/**
 * The one redaction pass for chat posts: every notify job (text, card title/text/fields/outcome,
 * attachment, upload name/title/comment and text contents) is redacted before it is queued, so secrets
 * never reach Redis or a platform. Platform adapters cut to their limits only after this.
 */

const TEXT_CONTENT = /^(?:text\/|application\/(?:json|x-ndjson|x-yaml|yaml|xml|javascript|x-python))/i;

function redactCard(card: CardPayload): CardPayload {
  const copy: CardPayload = { ...card };
  if (card.title !== undefined) copy.title = redactSecrets(card.title);
  if (card.text !== undefined) copy.text = redactSecrets(card.text);
  if (card.resolved !== undefined) copy.resolved = redactSecrets(card.resolved);
  if (card.fields !== undefined)
    copy.fields = card.fields.map((field) => ({
      label: redactSecrets(field.label),
      value: redactSecrets(field.value),
    }));
  if (card.actions !== undefined)
    copy.actions = card.actions.map((action) => ({ ...action, label: redactSecrets(action.label) }));
  if (card.image !== undefined)
    copy.image = {
      ...card.image,
      filename: redactSecrets(card.image.filename),
      alt: redactSecrets(card.image.alt),
    };
  if (card.attachment !== undefined)
    copy.attachment = {
      filename: redactSecrets(card.attachment.filename),
      text: redactSecrets(card.attachment.text),
    };
  return copy;
}

export function redactNotifyJob(job: NotifyJob): NotifyJob {
  switch (job.op) {
    case 'post':
    case 'edit':
    case 'ephemeral':
      return { ...job, text: redactSecrets(job.text) };
    case 'card':
    case 'update-card':
      return { ...job, card: redactCard(job.card) };
    case 'upload': {
      const copy: NotifyJob = { ...job, filename: redactSecrets(job.filename) };
      if (job.title !== undefined) copy.title = redactSecrets(job.title);
      if (job.comment !== undefined) copy.comment = redactSecrets(job.comment);
      if (TEXT_CONTENT.test(job.contentType)) {
        const text = Buffer.from(job.dataBase64, 'base64').toString('utf8');
        copy.dataBase64 = Buffer.from(redactSecrets(text), 'utf8').toString('base64');
      }
      return copy;
    }
  }
}
