import {
  type APIModalInteractionResponseCallbackData,
  ComponentType,
  type ModalSubmitInteraction,
  TextInputStyle,
} from 'discord.js';
import type { CardForm } from '../chat-adapter.js';

/**
 * A card button's form as a Discord modal: the click is answered with a MODAL (interaction callback type
 * 9) whose custom id is the button's action id, one action row per field with a text input (type 4)
 * whose custom id is the field id; the person's submit arrives as a MODAL_SUBMIT interaction (type 5)
 * and goes to the core as the same action with `values`. Limits from Discord's docs: title and labels
 * 45 characters, at most 5 inputs, 4000 characters each.
 */

export function modalOf(form: CardForm, actionId: string): APIModalInteractionResponseCallbackData {
  return {
    custom_id: actionId,
    title: form.title.slice(0, 45),
    components: form.fields.slice(0, 5).map((field) => {
      const maxLength = Math.min(field.maxLength, 4000);
      const value =
        field.initial !== undefined && field.initial.length <= maxLength ? field.initial : undefined;
      return {
        type: ComponentType.ActionRow,
        components: [
          {
            type: ComponentType.TextInput,
            custom_id: field.id,
            label: field.label.slice(0, 45),
            style: field.multiline === true ? TextInputStyle.Paragraph : TextInputStyle.Short,
            required: field.optional !== true,
            max_length: maxLength,
            ...(value === undefined ? {} : { value }),
          },
        ],
      };
    }),
  };
}

/** The submitted values by text input custom id (rows of inputs, or inputs inside labels). */
export function modalValues(interaction: ModalSubmitInteraction): Record<string, string> {
  const values: Record<string, string> = {};
  const take = (component: unknown) => {
    const input = component as { customId?: unknown; value?: unknown };
    if (typeof input.customId === 'string' && typeof input.value === 'string')
      values[input.customId] = input.value;
  };
  for (const top of interaction.components as unknown[]) {
    const container = top as { components?: unknown[]; component?: unknown };
    for (const inner of container.components ?? []) take(inner);
    if (container.component !== undefined) take(container.component);
    take(top);
  }
  return values;
}
