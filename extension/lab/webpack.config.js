// Merged by @jupyterlab/builder into its configuration. Module ids by order of use instead of
// hashes of module identifiers: the container entry's identifier holds the absolute path of the
// checkout, so hashed ids made the build differ between checkouts (and CI's check fail).
module.exports = {
  optimization: { moduleIds: "natural" },
};
