export { startScriptedAnthropic } from './anthropic-server.js';
export { startScriptedOpenAi } from './openai-server.js';
export type {
  RecordedRequest,
  ScriptedLlmServer,
  ScriptedServerOptions,
  ScriptedToolCall,
  Step,
  StepHandler,
} from './scripted-server.js';
