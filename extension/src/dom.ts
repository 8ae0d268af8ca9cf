/** Tiny DOM helpers (text always goes through textContent: nothing from the kernel becomes HTML). */

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: { [name: string]: string } = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === 'class') {
      node.className = value;
    } else {
      node.setAttribute(name, value);
    }
  }
  for (const child of children) {
    if (child === null || child === undefined) {
      continue;
    }
    node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

export function table(headers: string[], rows: (Node | string)[][], cls = ''): HTMLTableElement {
  return el(
    'table',
    { class: `kstream-table ${cls}`.trim() },
    el('thead', {}, el('tr', {}, ...headers.map(h => el('th', {}, h)))),
    el('tbody', {}, ...rows.map(r => el('tr', {}, ...r.map(c => el('td', {}, c)))))
  );
}

export function replaceChildren(parent: HTMLElement, ...children: (Node | string | null)[]): void {
  while (parent.firstChild) {
    parent.removeChild(parent.firstChild);
  }
  for (const c of children) {
    if (c !== null) {
      parent.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
  }
}
