// Interactive completion of missing `ichor init` flags, only on a terminal. Without one,
// a missing flag is an error that names it (checkInitInputs), never a prompt that hangs.
import type {InitFlags} from './inputs.js'

export function canPrompt(): boolean {
  return Boolean(process.stdin.isTTY && process.stdout.isTTY)
}

export async function promptMissingInitFlags(flags: InitFlags): Promise<InitFlags> {
  const {input} = await import('@inquirer/prompts')
  const out = {...flags}
  out.clusterName ??= await input({message: 'Cluster name', default: 'homelab', validate: (v) => /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(v) || 'lower-case letters, digits and "-"'})
  if (out.controlPlanes.length === 0) {
    const answer = await input({message: 'Control-plane node addresses (comma-separated)', validate: (v) => v.trim() !== '' || 'at least one'})
    out.controlPlanes = splitList(answer)
  }
  out.endpoint ??= await input({message: 'Kubernetes API endpoint', default: `https://${out.controlPlanes[0]}:6443`})
  if (out.workers.length === 0) out.workers = splitList(await input({message: 'Worker node addresses (comma-separated, empty for none)', default: ''}))
  return out
}

export async function confirm(message: string): Promise<boolean> {
  const prompts = await import('@inquirer/prompts')
  return prompts.confirm({message, default: true})
}

function splitList(text: string): string[] {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean)
}
