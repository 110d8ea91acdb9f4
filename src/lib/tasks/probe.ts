// The two answers of a probe, so every task file reads the same.
import type {ProbeResult} from './types.js'

export const holds = (detail?: string): ProbeResult => ({done: true, detail})
export const missing = (reason: string): ProbeResult => ({done: false, reason})
