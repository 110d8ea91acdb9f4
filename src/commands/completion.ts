import {Args} from '@oclif/core'
import {IchorCommand} from '../lib/cli/base.js'
import {bashCompletionScript, COMPLETION_SHELLS} from '../lib/cli/completion.js'

export default class Completion extends IchorCommand {
  static override summary = 'Print the completion script for bash: command names, flags, flag values and arguments.'
  static override description =
    'As kubectl completion and helm completion: the script is printed whole to stdout and reads no cache, so it keeps working after ~/.cache is cleaned. zsh is not supported yet.'
  static override examples = [
    '$ source <(<%= config.bin %> completion bash)',
    '$ <%= config.bin %> completion bash > ~/.local/share/bash-completion/completions/<%= config.bin %>',
  ]
  static override args = {
    shell: Args.string({description: 'the shell to print the script for', options: [...COMPLETION_SHELLS], required: true}),
  }

  async run(): Promise<{shell: string; script: string}> {
    const {args} = await this.parse(Completion)
    const script = bashCompletionScript(this.config.bin, this.config.commands)
    if (!this.jsonEnabled()) process.stdout.write(script)
    return {shell: args.shell, script}
  }
}
