// toYAML renders decoded JSON as YAML for reading (manifests). Strings that
// YAML would read as something else are quoted.

const PLAIN = /^[A-Za-z0-9_./@+=-][A-Za-z0-9_ ./@+=:,()-]*$/;
const SPECIAL = /^(true|false|yes|no|on|off|null|y|n|~)$/i;
const NUMBERLIKE = /^[-+]?(\.?\d|0x|0o)/i;

function scalar(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return '[]';
  if (typeof v === 'object') return '{}';
  const s = String(v);
  if (s === '' || !PLAIN.test(s) || SPECIAL.test(s) || NUMBERLIKE.test(s) || /: |:$| #|\s$/.test(s)) return JSON.stringify(s);
  return s;
}

function key(k) {
  return PLAIN.test(k) && !SPECIAL.test(k) && !/: |:$/.test(k) ? k : JSON.stringify(k);
}

function complex(v) {
  return v !== null && typeof v === 'object' && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
}

function emit(v, pad, out) {
  if (Array.isArray(v)) {
    for (const item of v) {
      if (complex(item)) {
        const sub = [];
        emit(item, '', sub);
        out.push(pad + '- ' + sub[0]);
        for (const line of sub.slice(1)) out.push(pad + '  ' + line);
      } else {
        out.push(pad + '- ' + scalar(item));
      }
    }
    return;
  }
  for (const [k, val] of Object.entries(v)) {
    if (complex(val)) {
      out.push(pad + key(k) + ':');
      emit(val, Array.isArray(val) ? pad : pad + '  ', out);
    } else {
      out.push(pad + key(k) + ': ' + scalar(val));
    }
  }
}

/** toYAML renders an object or array (a scalar renders as itself). */
export function toYAML(v) {
  if (!complex(v)) return scalar(v);
  const out = [];
  emit(v, '', out);
  return out.join('\n');
}
