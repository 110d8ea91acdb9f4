// fast-levenshtein ships no types; this is the part ichor calls.
declare module 'fast-levenshtein' {
  const levenshtein: {get(a: string, b: string, options?: {useCollator?: boolean}): number}
  export default levenshtein
}
