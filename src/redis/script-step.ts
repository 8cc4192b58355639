/**
 * A write that one module's script hands to another's, so two modules' writes go out as one script
 * (one round trip) while each module keeps owning its keys. `lua` defines `local function step(args)`;
 * the host script runs it after its own writes, with every `SCRIPT_NEW_ID` in `args` replaced by the id
 * it just assigned, and returns what it returned.
 */
export interface ScriptStep {
  lua: string;
  args: string[];
}

/** Stands for the host script's new id in a `ScriptStep`'s args (JSON never contains this raw byte). */
export const SCRIPT_NEW_ID = '\x01';
