// `ichor stack password kokumi`: the generated Kokumi admin password, read from the Secret
// ichor keeps in ichor-system. Read-only, so no Lease; the caller prints it to stdout only.
import {ICHOR_SYSTEM, STATE_SECRETS} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {withSession} from '../session/session.js'
import {readGeneratedSecrets} from '../state/installation.js'

export async function readKokumiAdminPassword(options: {kubeconfig?: string; context?: string}): Promise<string> {
  const password = await withSession(
    {command: 'stack password', ...options},
    async (session) => (await readGeneratedSecrets(await session.kube())).kokumiAdminPassword,
  )
  if (!password) {
    throw new IchorError(`Secret ${ICHOR_SYSTEM}/${STATE_SECRETS.kokumiAdmin} holds no Kokumi admin password`, {
      hint: 'run ichor init: it creates the password once',
    })
  }
  return password
}
