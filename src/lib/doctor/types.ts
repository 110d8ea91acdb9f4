// One check of `ichor doctor`: what was looked at, the verdict, and the one line that fixes it.
import type {TestedArtifact} from './tested.js'

export type CheckStatus = 'ok' | 'warn' | 'fail'

export interface DoctorCheck {
  /** Stable name for scripts: `talosctl`, `helm`, `kubeconfig`, `kube-api`, `asset:cilium`, `state-dir`, `kubeconfig-expiry`, `talosconfig-expiry`. */
  id: string
  status: CheckStatus
  /** What was found, in one line. */
  detail: string
  /** What to do about a warn or fail, in one line. */
  fix?: string
}

export interface DoctorReport {
  /** False when any check failed (the command then exits 1). */
  ok: boolean
  checks: DoctorCheck[]
  /** Checks that were not run, and why (e.g. no kubeconfig was given). */
  skipped: string[]
  /** Which pinned artifacts this build's tests ran (the pin itself, or only older versions). */
  tested: TestedArtifact[]
}

export const ok = (id: string, detail: string): DoctorCheck => ({id, status: 'ok', detail})
export const warn = (id: string, detail: string, fix: string): DoctorCheck => ({id, status: 'warn', detail, fix})
export const fail = (id: string, detail: string, fix: string): DoctorCheck => ({id, status: 'fail', detail, fix})

/** The message of an error, without the stack, for a check's detail. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/** The hint an IchorError carries, if any. */
export function hintOf(error: unknown): string | undefined {
  return (error as {hint?: string} | undefined)?.hint
}
