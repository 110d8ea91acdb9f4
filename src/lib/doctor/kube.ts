// The kubeconfig and context a day-2 command would use, and whether the API server answers.
import {expiryWarning, KUBECONFIG_RENEWAL, kubeconfigCertificate} from '../talos/credential-expiry.js'
import {connectKube} from '../kube/client.js'
import {loadKubeconfig, type KubeconfigOptions} from '../kube/kubeconfig.js'
import {fail, hintOf, messageOf, ok, warn, type DoctorCheck} from './types.js'

/** Two checks: the kubeconfig (file and context readable) and the API server (GET /version). */
export async function checkKube(options: KubeconfigOptions): Promise<DoctorCheck[]> {
  let source: string
  let context: string
  let server: string | undefined
  let certificate: ReturnType<typeof kubeconfigCertificate>
  try {
    const config = loadKubeconfig(options)
    certificate = kubeconfigCertificate(config)
    source = config.files.join(', ') || config.source
    context = config.context
    server = config.cluster?.server
  } catch (error) {
    return [fail('kubeconfig', messageOf(error), hintOf(error) ?? 'pass --kubeconfig FILE (and --context NAME) of the cluster')]
  }
  if (!server) {
    return [
      fail(
        'kubeconfig',
        `context "${context}" in ${source} names no cluster with a server URL`,
        'pass --context NAME of a context with a cluster, or fix the kubeconfig',
      ),
    ]
  }
  const checks = [ok('kubeconfig', `context "${context}" in ${source}, server ${server}`)]
  const expiring = expiryWarning(certificate, KUBECONFIG_RENEWAL)
  if (expiring) checks.push(warn('kubeconfig-expiry', expiring.what, expiring.fix))
  else if (certificate) checks.push(ok('kubeconfig-expiry', `client certificate valid until ${certificate.notAfter.toISOString().slice(0, 10)}`))
  try {
    const kube = await connectKube({...options, probe: true})
    checks.push(ok('kube-api', `${server} answers: Kubernetes ${kube.serverVersion ?? 'version unknown'}`))
  } catch (error) {
    checks.push(
      fail('kube-api', messageOf(error), hintOf(error) ?? `check that ${server} is reachable from here and the credentials of context "${context}" are valid`),
    )
  }
  return checks
}
