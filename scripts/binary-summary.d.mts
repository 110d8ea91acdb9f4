export function countWarnings(captured: string, bundlerWarnings: number): number
export function binarySummary(s: {out: string; bytes: number; node: string; notPinned: string[]; warnings: number; log: string}): string[]
