// The theme chosen with the toggle, applied before the first paint (a classic script: it blocks
// rendering for a moment so that a dark page never flashes light). The toggle is in app.js.
try {
  const theme = localStorage.getItem("vaultsearch.theme");
  if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
} catch {
  // storage refused (a privacy setting): the page follows the system's theme
}
