// What each command needs besides the cluster to get as far as connecting (required arguments
// and flags, no prompt): one table for every test that walks the commands against a fake server.
import {backupFixture} from './backup-fixture.js'

export async function requiredArgs(stateKeyFile: string): Promise<Record<string, string[]>> {
  // restore opens its backup (with the key it was written with) before it connects.
  const backup = await backupFixture()
  return {
    restore: ['--from', backup.file, '--state-passphrase-file', backup.keyFile, '--control-plane', '192.0.2.10', '--yes'],
    init: ['--cluster-name', 'x', '--endpoint', 'https://192.0.2.10:6443', '--control-plane', '192.0.2.10', '--state-passphrase-file', stateKeyFile, '--yes'],
    'kubernetes:upgrade': ['--to', '1.37.0', '--yes'],
    'talos:upgrade': ['--to', 'v1.14.1', '--yes'],
    'node:remove': ['192.0.2.11', '--yes'],
    'node:replace': ['192.0.2.11', '192.0.2.12', '--yes'],
    'credentials:renew': ['--yes'],
    'cni:upgrade': ['--yes'],
    'cni:kube-proxy:replace': ['--yes'],
    'cni:kube-proxy:restore': ['--yes'],
    'cni:values:set': ['--yes'],
    'cni:values:edit': ['--yes'],
    'stack:sync': ['--yes'],
    'stack:repair-secrets': ['--yes'],
    'stack:password': ['kokumi'],
    open: ['argocd'],
    'stack:promote': ['argocd', '--yes'],
    'stack:promotion:set': ['Manual', '--yes'],
    'stack:values:diff': ['argocd'],
    'stack:values:edit': ['argocd', '--yes'],
    'stack:values:get': ['argocd'],
    'stack:values:set': ['argocd', '--yes'],
  }
}
