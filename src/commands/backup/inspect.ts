import {Args} from '@oclif/core'
import {formatBackupContents} from '../../lib/backup/report.js'
import {IchorCommand} from '../../lib/cli/base.js'
import {outputFormatFlag, statePassphraseFlags} from '../../lib/cli/flags.js'
import {printResult} from '../../lib/cli/output.js'
import {runBackupInspect} from '../../lib/plans/backup.js'

export default class BackupInspect extends IchorCommand {
  static override summary = 'List what a backup file holds, after decrypting it and checking every part.'
  static override description = `Reads the file on this machine only; no cluster is contacted. The key is the one the backup was encrypted with (--state-passphrase-file, else ICHOR_STATE_PASSPHRASE_FILE, else asked on a terminal). A file that is not an age file, that the key does not open, that was cut or changed, or whose parts differ from its manifest's sha256 is refused (exit 2) naming why.`
  static override examples = [
    '<%= config.bin %> backup inspect homelab-20261207T061500Z.ichor-backup',
    '<%= config.bin %> backup inspect ./last.ichor-backup -o json',
  ]
  static override args = {file: Args.string({description: 'the backup file', required: true})}
  static override flags = {...statePassphraseFlags, ...outputFormatFlag}

  async run() {
    const {args, flags} = await this.parse(BackupInspect)
    const json = this.jsonEnabled()
    const result = await runBackupInspect({file: args.file, statePassphraseFile: flags['state-passphrase-file'], json})
    await printResult(result, {format: flags.output, json, human: (r) => formatBackupContents(r.path, r.bytes, r.manifest)})
    return result
  }
}
