// Shell completion beyond what @oclif/plugin-autocomplete 3.3 generates: its bash function
// completes command names and, when the word starts with "-", the flags of the command made of
// every earlier word (lib/autocomplete/bash-spaces.js), so it offers nothing for a flag's value
// (`-o <TAB>`), an argument (`stack values set <TAB>`), a file, or a flag after an argument.
// ichor appends a function to the script the plugin writes that knows each command's flags and
// arguments from the loaded commands, and hands command names back to the plugin's function.
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

const MARKER = '# ichor: completion of flag values, arguments and flags after arguments'

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
  for (const c of commands) {
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

/** The bash function appended to the plugin's script; `pluginFunction` completes command names. */
export function bashCompletionExtension(bin: string, commands: readonly CompletionCommand[]): string {
  const fn = `_${bin.replaceAll('-', '_')}`
  return `
${MARKER}
# (appended by ${bin} to the script @oclif/plugin-autocomplete generates).
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
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" cmd="" prefix="" try w i end=0 found kind words pos=0
  COMPREPLY=()
  # The command: the words after ${bin} that name one (topics first: "cni values get").
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && break
    try="\${prefix:+$prefix:}$w"
    if [[ "$${fn}_spec" == *$'\\n'"$try @ B"$'\\n'* ]]; then
      cmd="$try"
      end=$((i + 1))
      break
    elif [[ "$${fn}_spec" == *$'\\n'"$try:"* ]]; then
      prefix="$try"
    else
      break
    fi
  done
  # No command yet: command names (and the plugin's flags) as the plugin completes them.
  if [[ -z "$cmd" ]]; then
    _${bin}_autocomplete "$@"
    return 0
  fi
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

/** Appends the extension to the bash script the plugin just wrote (idempotent). */
export function extendBashCompletionScript(cacheDir: string, bin: string, commands: readonly CompletionCommand[]): void {
  const file = join(cacheDir, 'autocomplete', 'functions', 'bash', `${bin}.bash`)
  if (!existsSync(file)) return
  const script = readFileSync(file, 'utf8')
  const at = script.indexOf(`\n${MARKER}`)
  writeFileSync(file, (at >= 0 ? script.slice(0, at) : script) + bashCompletionExtension(bin, commands))
}

/**
 * Run by both entry points after an `ichor autocomplete …` command: the plugin has (re)written
 * its script, and ichor's part is appended to it. Completion without it still completes
 * command and flag names, so a failure here is a warning, not an error.
 */
export async function afterAutocomplete(loadConfig: () => Promise<{cacheDir: string; bin: string; commands: readonly CompletionCommand[]}>): Promise<void> {
  try {
    const config = await loadConfig()
    extendBashCompletionScript(config.cacheDir, config.bin, config.commands)
  } catch (error) {
    process.stderr.write(`Warning: completion of flag values was not set up: ${error instanceof Error ? error.message : String(error)}\n`)
  }
}
