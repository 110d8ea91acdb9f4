// The one colour decision for what ichor prints itself (the diffs): FORCE_COLOR when set
// decides ('0' or 'false' off, anything else on), then NO_COLOR set to anything but ''
// turns colour off (no-color.org), then colour only on a terminal. The order is Node's own
// (nodejs/node v20 lib/internal/util/colors.js shouldColorize, lib/internal/tty.js getColorDepth).
export function wantsColour(stream: {isTTY?: boolean}, env: NodeJS.ProcessEnv = process.env): boolean {
  const force = env.FORCE_COLOR
  if (force !== undefined) return force !== '0' && force !== 'false'
  if (env.NO_COLOR) return false
  return stream.isTTY === true
}
