import Completion from '../completion.js'

// `eval "$(ichor autocomplete script bash)"`, the line a ~/.bashrc got before `ichor completion`:
// it now gets the whole script, which needs no cache file.
export default class AutocompleteScript extends Completion {
  static override hidden = true
  static override summary = 'The completion script, as ichor completion prints it (for ~/.bashrc lines written before it).'
  static override description =
    'Prints what ichor completion bash prints: eval "$(ichor autocomplete script bash)" in a ~/.bashrc keeps working, without a cache file.'
  static override examples = ['<%= config.bin %> autocomplete script bash']
}
