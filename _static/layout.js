/* Keyboard access to what scrolls, its visible cue, and formulas that name
 * themselves. Jupyter Book adds every .js file of _static/ to every page;
 * _static/layout.css has the matching rules, tests/e2e/test_layout.py checks.
 *
 * 1. A block wider than its box scrolls in it. Each one that overflows now
 *    gets data-sa-scroll (layout.css paints its scroll shadow) and
 *    --sa-cover, the colour behind it, so that the shadow's covers match.
 * 2. A box that scrolls must be reachable from the keyboard (WCAG 2.1.1;
 *    axe: scrollable-region-focusable). pydata-sphinx-theme makes code,
 *    outputs and tables tab stops when they overflow; a display equation
 *    that overflows becomes one here, a region named after its number.
 * 3. The formulas themselves are no tab stops ("include in tab order" is
 *    off, _config.yml). MathJax 4's speech rule engine writes each
 *    formula's spoken form into data-semantic-speech-none (and hides the
 *    assistive MathML from screen readers once it has); here that form
 *    becomes the formula's name, aria-label with role="math" (ARIA allows
 *    such a name only with a role; axe: aria-prohibited-attr). */
(function () {
  "use strict";
  const BOXES = ["article div.math", "article div.highlight pre",
                 "article .cell_output > .output",
                 "article .pst-scrollable-table-container",
                 "article .cell_output pre", "article figure"].join(", ");

  function nameFormulas() {
    for (const c of document.querySelectorAll("mjx-container")) {
      if (!c.hasAttribute("role")) c.setAttribute("role", "math");
      const spoken = c.getAttribute("data-semantic-speech-none");
      if (spoken && c.getAttribute("aria-label") !== spoken) {
        c.setAttribute("aria-label", spoken);
      }
    }
  }

  function rgba(text) {
    const v = (text.match(/[\d.]+/g) || []).map(Number);
    return v.length < 3 ? [0, 0, 0, 0] : [v[0], v[1], v[2],
                                          v.length > 3 ? v[3] : 1];
  }
  // The colour seen behind an element: its background over its ancestors'.
  function backdrop(el) {
    const layers = [];
    for (let a = el; a; a = a.parentElement) {
      const c = rgba(getComputedStyle(a).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let out = [255, 255, 255];
    const page = rgba(getComputedStyle(document.body).backgroundColor);
    if (page[3] >= 1) out = page.slice(0, 3);
    for (const c of layers.reverse()) {
      out = out.map((x, i) => x * (1 - c[3]) + c[i] * c[3]);
    }
    return `rgb(${out.map(Math.round).join(", ")})`;
  }

  function markScrolling() {
    document.querySelectorAll(BOXES).forEach((box, k) => {
      const wide = box.scrollWidth > box.clientWidth + 1;
      if (wide) {
        box.dataset.saScroll = "";
        box.style.setProperty("--sa-cover", backdrop(box));
      } else if ("saScroll" in box.dataset) {
        delete box.dataset.saScroll;
        box.style.removeProperty("--sa-cover");
      }
      if (!box.matches("div.math")) return;
      if (wide && !box.hasAttribute("tabindex")) {
        const eqno = box.querySelector(".eqno");
        const number = eqno ? eqno.textContent.replace(/[^\d.()]/g, "") : "";
        box.tabIndex = 0;
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", number
          ? `Equation ${number}, scrolls sideways`
          : `Display formula ${k + 1} of this page, scrolls sideways`);
      } else if (!wide && box.hasAttribute("tabindex")) {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
    });
  }

  let pending = null;
  function later() {  // at most every 150 ms, even under steady changes
    if (pending !== null) return;
    pending = setTimeout(() => { pending = null; markScrolling(); }, 150);
  }
  // A box or its formula that changes size without a change of the page's
  // markup (MathJax's web fonts arriving, the column narrowing as a scroll
  // bar appears) is measured again too.
  const sizes = window.ResizeObserver ? new ResizeObserver(later) : null;
  const watched = new WeakSet();
  function watchSizes() {
    if (!sizes) return;
    for (const el of document.querySelectorAll(
        "article div.math, article div.math > mjx-container")) {
      if (!watched.has(el)) {
        watched.add(el);
        sizes.observe(el);
      }
    }
  }
  function start() {
    nameFormulas();
    watchSizes();
    new MutationObserver(() => { nameFormulas(); watchSizes(); later(); })
      .observe(document.body, {childList: true, subtree: true,
                               attributeFilter: ["data-semantic-speech-none"]});
    window.addEventListener("resize", later);
    markScrolling();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(() => {
        nameFormulas();
        watchSizes();
        markScrolling();
      });
    }
    if (document.fonts) document.fonts.ready.then(later);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
