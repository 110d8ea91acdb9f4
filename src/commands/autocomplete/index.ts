import {Args, Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {completionSetupText, COMPLETION_SHELLS} from '../../lib/cli/completion.js'

// Kept for the shells set up before `ichor completion` existed; hidden, so help advertises one way.
export default class Autocomplete extends IchorCommand {
  static override hidden = true
  static override summary = 'How to set up shell completion (now ichor completion bash).'
  static override examples = ['<%= config.bin %> autocomplete bash']
  static override args = {
    shell: Args.string({description: 'the shell to set completion up in', options: [...COMPLETION_SHELLS], required: false}),
  }
  static override flags = {
    // The flag of the plugin this command replaces: accepted, and nothing to do.
    'refresh-cache': Flags.boolean({char: 'r', hidden: true, description: 'accepted for old scripts: the completion script reads no cache'}),
  }

  async run(): Promise<{setup: string}> {
    await this.parse(Autocomplete)
    const setup = completionSetupText(this.config.bin)
    if (!this.jsonEnabled()) process.stdout.write(setup)
    return {setup}
  }
}
