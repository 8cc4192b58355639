import { make } from './dom.js';

/**
 * The playground's inline form under a card (a reject reason, an edit): the server hands it out when a
 * button is clicked with `openForm`, and its values go back with the same action. The thread is redrawn
 * whenever something arrives, so each open form keeps one element, moved into the new card, and the
 * field being typed in keeps the focus.
 */

interface FormField {
  id: string;
  label: string;
  initial?: string;
  multiline?: boolean;
  optional?: boolean;
  maxLength: number;
}

export interface PageCardForm {
  title: string;
  submitLabel: string;
  fields: FormField[];
  /** Why a field is missing (a script too long for a form). */
  note?: string;
}

const openForms = new Map<string, HTMLFormElement>();

export function closeCardForm(messageId: string): void {
  openForms.delete(messageId);
}

/** Opens the form under a card; `submit` gets the values (an empty optional field is sent empty). */
export function openCardForm(
  messageId: string,
  form: PageCardForm,
  submit: (values: Record<string, string>) => void,
): void {
  const element = make('form', 'card-form');
  element.append(make('div', 'card-form-title', form.title));
  if (form.note !== undefined) element.append(make('p', 'card-form-note', form.note));
  const inputs: Array<[string, HTMLInputElement | HTMLTextAreaElement]> = [];
  for (const field of form.fields) {
    const label = make('label', null, field.label);
    const input = field.multiline ? make('textarea') : make('input');
    input.name = field.id;
    input.maxLength = field.maxLength;
    input.required = field.optional !== true;
    input.value = field.initial ?? '';
    if (input instanceof HTMLTextAreaElement)
      input.rows = Math.min(16, Math.max(2, input.value.split('\n').length));
    label.append(input);
    element.append(label);
    inputs.push([field.id, input]);
  }
  const buttons = make('div', 'actions');
  const send = make('button', 'action primary', form.submitLabel);
  send.type = 'submit';
  const cancel = make('button', 'action default', 'Cancel');
  cancel.type = 'button';
  cancel.addEventListener('click', () => {
    openForms.delete(messageId);
    element.remove();
  });
  buttons.append(send, cancel);
  element.append(buttons);
  element.addEventListener('submit', (event) => {
    event.preventDefault();
    openForms.delete(messageId);
    submit(Object.fromEntries(inputs.map(([id, input]) => [id, input.value])));
  });
  openForms.set(messageId, element);
}

/** The form as sent, holding the values sent; undefined without either. */
export function refilled(
  form: PageCardForm | undefined,
  values: Record<string, string> | undefined,
): PageCardForm | undefined {
  if (form === undefined || values === undefined) return undefined;
  return { ...form, fields: form.fields.map((field) => ({ ...field, initial: values[field.id] ?? '' })) };
}

/** The card's open form, moved into the redrawn card with its focus kept; undefined when none is open. */
export function openFormOf(messageId: string): HTMLFormElement | undefined {
  const element = openForms.get(messageId);
  if (element === undefined) return undefined;
  const focused = document.activeElement;
  if (focused instanceof HTMLElement && element.contains(focused)) queueMicrotask(() => focused.focus());
  return element;
}
