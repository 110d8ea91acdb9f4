// Shell completion for bash, as `ichor completion bash` prints it: one self-contained script (as
// `kubectl completion bash` and `helm completion bash` print theirs) that knows every command's
// names, flags, flag values and arguments from the loaded commands. Nothing is read from a cache
// at <TAB>, so cleaning ~/.cache breaks nothing. @oclif/plugin-autocomplete, which ichor used
// before, wrote its functions into the cache folder and completed no flag values or arguments.

export interface CompletionFlag {
  name: string
  char?: string
  type: 'boolean' | 'option'
  options?: readonly string[]
  helpValue?: string | string[]
}

export interface CompletionCommand {
  id: string
  aliases?: readonly string[]
  hidden?: boolean
  flags: Record<string, CompletionFlag>
  args: Record<string, {options?: readonly string[]}>
}

/** How a value is completed: W words, F files, D directories, S free text (nothing offered), B no value. */
function kindOf(flag: CompletionFlag): string {
  if (flag.type === 'boolean') return 'B'
  if (flag.options?.length) return `W ${flag.options.join(' ')}`
  const help = [flag.helpValue].flat().join(' ')
  if (help === 'FILE') return 'F'
  if (help === 'DIR') return 'D'
  return 'S'
}

const safe = (word: string) => /^[\w.:@#=+/-]+$/.test(word)

/** One line per command, flag and argument: `<id> <@|--flag|-c|#N> <kind> [words...]`. */
export function completionSpec(commands: readonly CompletionCommand[]): string {
  const lines: string[] = []
  // By id: the same script whichever order the plugins loaded in (the npm build loads them in parallel).
  for (const c of [...commands].sort((a, b) => a.id.localeCompare(b.id))) {
    if (c.hidden) continue
    for (const id of [c.id, ...(c.aliases ?? [])]) {
      lines.push(`${id} @ B`)
      for (const flag of Object.values(c.flags)) {
        const kind = kindOf(flag)
        lines.push(`${id} --${flag.name} ${kind}`)
        if (flag.char) lines.push(`${id} -${flag.char} ${kind}`)
      }
      for (const [i, arg] of Object.values(c.args).entries()) if (arg.options?.length) lines.push(`${id} #${i} W ${arg.options.join(' ')}`)
    }
  }
  // Every word lands in a single-quoted bash string and a `compgen -W` list: plain words only.
  return lines.filter((l) => l.split(' ').every(safe)).join('\n')
}

/** The whole bash completion script: `source <(ichor completion bash)`. */
export function bashCompletionScript(bin: string, commands: readonly CompletionCommand[]): string {
  const fn = `_${bin.replaceAll('-', '_')}`
  return `# bash completion for ${bin}: command names, flags, flag values and arguments.
# Load it in this shell:      source <(${bin} completion bash)
# Load it in every new shell: ${bin} completion bash > ~/.local/share/bash-completion/completions/${bin}
${fn}_spec='
${completionSpec(commands)}
'

# The kind and words of "<id> <token>" in the spec, or nothing.
${fn}_find() {
  local id tok kind rest
  while read -r id tok kind rest; do
    if [[ "$id" == "$1" && "$tok" == "$2" ]]; then
      printf '%s %s' "$kind" "$rest"
      return 0
    fi
  done <<< "$${fn}_spec"
  return 1
}

${fn}_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" cmd="" prefix="" try w i end=0 found kind words pos=0 tok rest topic=1
  COMPREPLY=()
  # The command: the words after ${bin} that name one, topics first ("cni values get"); a topic
  # that is a command too ("backup") goes on to its subcommands ("backup inspect").
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && break
    try="\${prefix:+$prefix:}$w"
    if [[ "$${fn}_spec" == *$'\\n'"$try @ B"$'\\n'* ]]; then
      cmd="$try"
      prefix="$try"
      end=$((i + 1))
    elif [[ "$${fn}_spec" == *$'\\n'"$try:"* ]]; then
      prefix="$try"
    else
      topic=0
      break
    fi
  done
  # Every word so far named a topic or a command: the next command word, or an argument or flag below.
  if ((topic)) && ((i == COMP_CWORD)) && [[ "$cur" != -* ]]; then
    words=" "
    while read -r w tok rest; do
      [[ "$tok" == @ ]] || continue
      if [[ -n "$prefix" ]]; then
        [[ "$w" == "$prefix:"* ]] || continue
        w="\${w#"$prefix:"}"
      fi
      w="\${w%%:*}"
      [[ "$words" == *" $w "* ]] || words+="$w "
    done <<< "$${fn}_spec"
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    [[ -z "$cmd" || "$cmd" != "$prefix" ]] && return 0
    ((\${#COMPREPLY[@]})) && return 0
  fi
  [[ -z "$cmd" ]] && return 0
  prev="\${COMP_WORDS[COMP_CWORD - 1]}"
  # --flag=value: bash splits it at "=" (COMP_WORDBREAKS).
  if [[ "$cur" == "=" ]]; then
    cur=""
  elif [[ "$prev" == "=" ]]; then
    prev="\${COMP_WORDS[COMP_CWORD - 2]}"
  fi
  # A flag's value.
  if [[ "$prev" == -* ]] && found="$(${fn}_find "$cmd" "$prev")"; then
    kind="\${found%% *}"
    words="\${found#* }"
    case "$kind" in
      W) COMPREPLY=($(compgen -W "$words" -- "$cur")); return 0 ;;
      F) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
      D) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")); return 0 ;;
      S) return 0 ;;
    esac
  fi
  # Flags, also after arguments.
  if [[ "$cur" == -* ]]; then
    words="$(while read -r id tok kind rest; do [[ "$id" == "$cmd" && "$tok" == --* ]] && printf '%s ' "$tok"; done <<< "$${fn}_spec")"
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return 0
  fi
  # An argument: its position among the words after the command, flag values left out.
  for ((i = end; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    if [[ "$w" == -* ]]; then
      found="$(${fn}_find "$cmd" "$w")" && [[ "\${found%% *}" != B ]] && ((i++))
    elif [[ "$w" != "=" ]]; then
      ((pos++))
    fi
  done
  if found="$(${fn}_find "$cmd" "#$pos")"; then
    COMPREPLY=($(compgen -W "\${found#* }" -- "$cur"))
  fi
  return 0
}

complete -F ${fn}_complete ${bin}
`
}

/** The shells ichor prints a completion script for; zsh is not supported yet (no zsh to test it with). */
export const COMPLETION_SHELLS = ['bash'] as const

/** What `ichor autocomplete` (the command ichor had before `completion`) prints now: how to load the script. */
export function completionSetupText(bin: string): string {
  return [
    `Shell completion for bash: add this line to ~/.bashrc, then start a new shell:`,
    '',
    `  source <(${bin} completion bash)`,
    '',
    `The script comes whole from ${bin} completion bash and reads no cache: there is nothing to refresh.`,
    'zsh is not supported yet.',
    '',
  ].join('\n')
}
