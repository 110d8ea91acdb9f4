// Reading a user's values file: YAML 1.2 (so `yes`/`on` stay strings and a type error
// shows up in validation instead of silently becoming a boolean), one document, a map.
import {readFileSync} from 'node:fs'
import {parseAllDocuments} from 'yaml'
import {IchorError} from '../errors/errors.js'
import {isMap, type Values} from './path.js'

export function readValuesFile(file: string, flag = '-f'): Values {
  let text: string
  try {
    text = file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'permission denied' : String(code ?? error)
    throw new IchorError(`${flag} ${file}: cannot read the values file: ${why}`, {exitCode: 2})
  }
  return parseValuesText(text, `${flag} ${file}`)
}

export function parseValuesText(text: string, label: string): Values {
  const docs = parseAllDocuments(text, {version: '1.2', uniqueKeys: true, prettyErrors: true})
  if (!Array.isArray(docs)) return {}
  const nonEmpty = docs.filter((d) => d.errors.length > 0 || d.contents !== null)
  if (nonEmpty.length > 1) {
    throw new IchorError(`${label}: holds ${nonEmpty.length} YAML documents; a values file is one document (a map)`, {exitCode: 2})
  }
  const doc = nonEmpty[0]
  if (!doc) return {}
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!
    const where = first.linePos?.[0] ? ` at line ${first.linePos[0].line}, column ${first.linePos[0].col}` : ''
    throw new IchorError(`${label}: not valid YAML${where}: ${first.message.split('\n')[0]}`, {exitCode: 2})
  }
  const value = doc.toJS({maxAliasCount: 100})
  if (value === null || value === undefined) return {}
  if (!isMap(value)) {
    const kind = Array.isArray(value) ? 'a list' : `a ${typeof value}`
    throw new IchorError(`${label}: the document is ${kind}; a values file must be a map of keys (e.g. "hubble:\\n  enabled: true")`, {exitCode: 2})
  }
  return value
}
