/** The Slack emulator's public surface; see emulator.ts for the behaviour of each method. */
export {
  type AckRecord,
  type EmulatedUser,
  type Fault,
  type RecordedCall,
  type SignedResponse,
  type SlackEmulator,
  type SlackEmulatorOptions,
  type StoredMessage,
  type StoredUpload,
  startSlackEmulator,
} from './emulator.js';
export {
  appHomeOpenedEvent,
  type BlockActionInput,
  blockActionsPayload,
  encodeDelivery,
  eventCallback,
  type HttpDelivery,
  homeBlockActionsPayload,
  type MessageEventInput,
  messageEvent,
  type SlashCommandInput,
  signSlackRequest,
  slashCommandPayload,
  viewSubmissionPayload,
} from './payloads.js';
